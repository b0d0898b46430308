/* Columnar decoder for the ``traceEvents`` array of a Kineto trace (optional accelerator).

   decode_events(buffer, event_spec, args_spec, seed) reads the JSON text of the events array
   (``[ {...}, ... ]``) and returns one column per field, with no object per event. The specs
   come from hta_lite/load/schema.py, the one list of the fields read: a tuple of (JSON key,
   attribute name, kind, default) per field, the default being a row's value without the key.

     {"n": rows,
      "fields": {"id": column, ...},     event keys held by some row (absent: every row default),
                                but for the text and pid / tid fields, given by their codes alone
      "args": {"stream": column, ...},   args keys, by attribute name
      "coded": {"ph": (codes, distinct), ...}   text and pid / tid fields: each row's object
                                numbered by identity (int32 bytes) and the distinct objects
      "args_coded": {"input_dims": (codes, distinct), ...}   the same for JSON-text args
      "ts": bytes, "ts_valid": bytes, "dur": ..., "dur_valid": ...}
                                int64 ns per row, and uint8: 0 invalid, 1 valid, 2 valid with
                                nonzero digits below a nanosecond truncated
      "string_probes": n}       string table slots looked at (at most MAX_PROBES per string)

   A column is a list of one value per row when at least half the rows hold the key, else
   (rows, values): the rows that hold it (int32 bytes, increasing) and their values, so that a
   key few rows have costs memory for those rows only. A column of integers (kind K_INT_STR,
   an integer default) where no row holds text has no Python object per value: (None, int64
   bytes of every row, the default where absent) or, sparse, (rows, int64 bytes of their
   values).

   It gives exactly what the msgspec path of hta_lite.load.decode would give (schema.Event and
   schema.Args: the same keys, types and defaults), or None whenever it meets anything
   outside the subset it handles (a value of an unexpected type, a key with an escape, a
   timestamp with an exponent or more than 12 decimals, an integer of more than 18
   digits, malformed JSON, ...): the caller then takes the msgspec path, which decides.
   Equal strings share one object and small integers are reused, so the lists are cheap.

   The same parser reads the array in pieces (a gzip stream, without the whole text in memory):
   stream_open(event_spec, args_spec, seed, rows, after_comma=False) -> stream;
   stream_feed(stream, buffer, final, base=0, limit=-1) -> (bytes consumed, status) or None
   (declined): the buffer holds the text after the opening ``[`` (or, after_comma, after a
   comma between events), or what follows the bytes consumed by the previous feed; an event cut
   by the end of the buffer is left for the next feed (with ``final``, the text must end the
   array). Status 0: more text wanted; 1: the closing ``]`` read; 2: stopped before the first
   event that starts at or after ``limit`` (offsets in the text: ``base`` is the buffer's).
   stream_join(first, second): a stream opened after_comma that read from where ``first``
   stopped to the array's end becomes the rest of ``first`` (two threads read one file).
   stream_result(stream) -> the dict above (None: declined).

   A stream reads without the GIL (deferred mode): no Python object is made or touched while it
   reads. Each value that becomes an object is recorded as the id of its distinct (kind, JSON
   text) in a value table (its text copied into an arena) and tagged into the column's slot;
   stream_result makes each distinct value's object once, with the GIL (the strings of joined
   streams through one string table, so that equal strings stay one object). Its memory is
   PyMem_Raw*, which needs no GIL; running out of it is raised once the GIL is back.

   int_rows(buffer, width): [[int, ...], ...] rows of ``width`` integers (HTA's raw memory
   timeline) as int64 bytes, row after row, or None.
   category_sums(source, categories, ...): such rows of 4 (ts, action, bytes, category) summed
   per category after each run of one ts, without an array of the rows, from the text or from
   a reader of it (a piece at a time).

   Buffer lifetime: nothing kept points into a buffer after a call returns (the string table's
   keys are the UTF-8 of its own str objects). Untrusted input: the string table's hash is seeded (``seed``, random per
   process) and its probes are bounded (a string not found within MAX_PROBES slots is made
   unshared), so no input makes a lookup cost more than MAX_PROBES comparisons.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#define MAX_DEPTH 512
#define MAX_PROBES 32

/* ---- columns ---------------------------------------------------------------------------- */

enum kind { K_PHASE, K_OPT_STR, K_INT_STR_NULL, K_INT_STR, K_FLOAT_STR, K_TUPLE_STR_NULL, K_ANY, K_RAW };

typedef struct {
    const char *key;     /* JSON key (UTF-8 of the spec's str, alive for the call) */
    Py_ssize_t key_len;
    PyObject *name;      /* attribute name (borrowed from the spec) */
    enum kind kind;
    PyObject *dflt;      /* value of a row without the key (borrowed) */
    int next_same_len;   /* the next field whose key has this length, -1 at the end */
} FieldSpec;

/* A spec's fields by key length: the first field of each length, -1 where none (longer keys: a
   linear search). Most keys of an event are not read; they are ruled out by length alone. */
#define LEN_SLOTS 64
typedef struct {
    const FieldSpec *specs;
    size_t n;
    int first_of_len[LEN_SLOTS];
} FieldIndex;

/* every phase of the Chrome trace format (decode.Phase) */
static const char *PHASES = "XBEiICbneSTpFstfPNODMVvRc()";

typedef struct {
    int32_t *rows;       /* the rows that hold the key, increasing */
    PyObject **vals;     /* their values (new references; NULL: the integer in ``ints``) */
    int64_t *ints;       /* integer values, for a typed column */
    Py_ssize_t count, cap;
    int typed;           /* integers are kept in ``ints`` (kind K_INT_STR, integer default) */
    int has_obj;         /* a row of a typed column holds text: the column is made of objects */
    int64_t int_dflt;    /* the default, for a typed column */
} Column;

/* ---- parser state ----------------------------------------------------------------------- */

typedef struct {
    uint64_t hash;
    const char *ptr;
    Py_ssize_t len;
    PyObject *obj;
} CacheEntry;

typedef struct {
    uint64_t hash;
    Py_ssize_t id;           /* -1: empty */
} ValueSlot;

typedef struct {
    size_t off;              /* in the arena */
    Py_ssize_t len;
    enum kind kind;
    int provisional;         /* first met in an event a stream's piece cut (forget_row), not since */
} ValueText;

typedef struct Parser {
    const char *p, *end;
    int decline;             /* outside the handled subset: return None */
    int error;               /* a Python exception is set */
    CacheEntry *cache;       /* strings without escapes, keyed by their JSON bytes */
    size_t cache_mask, cache_used;
    PyObject *int_cache[1024];
    int64_t int_keys[1024];
    PyObject *phase_obj[128];
    uint64_t seed;           /* of the string table's hash */
    Py_ssize_t probes;       /* string table slots looked at, in all (the complexity probe) */
    Py_ssize_t rows, cap;    /* rows read; rows allocated in the time arrays */
    Py_ssize_t args_row;     /* the last row whose "args" were read (0 at the start) */
    FieldSpec *event_specs, *args_specs;
    size_t n_event, n_args;
    FieldIndex event_index, args_index;
    Column *event_cols, *args_cols;
    int64_t *ts, *dur;       /* ns */
    uint8_t *ts_valid, *dur_valid;  /* 0 invalid, 1 valid, 2 valid with sub-ns digits dropped */
    /* deferred mode (the stream): no Python object is made while reading, so that the GIL is
       released; each value that becomes an object is the id of its distinct (kind, JSON text)
       in the value table, tagged into its column's slot (see TAG) */
    int deferred;
    int nomem;               /* deferred: memory ran out (MemoryError raised once the GIL is back) */
    ValueSlot *vslots;       /* the value table: ids by hash */
    size_t vslots_mask, vslots_used;
    ValueText *vtexts;       /* per id: its kind and text (in ``arena``) */
    Py_ssize_t n_vtexts, vtexts_cap;
    char *arena;
    size_t arena_len, arena_cap;
    PyObject **vobjs;        /* per id, once made (materialize): its object */
    struct Parser *next;     /* the events after this parser's, read by another (stream_join) */
} Parser;

/* A deferred value in a column's slot: an odd pointer (objects are aligned), never dereferenced. */
#define IS_TAG(v) (((uintptr_t)(v)) & 1)
#define TAG(id) ((PyObject *)(((uintptr_t)(id) << 1) | 1))
#define TAG_ID(v) ((Py_ssize_t)(((uintptr_t)(v)) >> 1))

/* A slot's value as it leaves a column: a real object, or NULL (an integer kept in ``ints``). */
static inline PyObject *slot_object(const Parser *ps, PyObject *v) { return IS_TAG(v) ? ps->vobjs[TAG_ID(v)] : v; }

/* Drop a slot's value (a tag holds no reference: no GIL needed for it). */
static inline void drop_slot(PyObject *v) {
    if (v && !IS_TAG(v)) Py_DECREF(v);
}

/* Memory ran out: an exception now, or (deferred, without the GIL) once the GIL is back. */
static void out_of_memory(Parser *ps) {
    ps->error = 1;
    if (ps->deferred) ps->nomem = 1;
    else PyErr_NoMemory();
}

static void clear_objs(PyObject **objs, size_t n) {
    for (size_t i = 0; i < n; i++) Py_CLEAR(objs[i]);
}

static unsigned char IS_SPACE[256]; /* JSON whitespace: space, \n, \r, \t */

static inline void skip_ws(Parser *ps) {
    const unsigned char *p = (const unsigned char *)ps->p, *end = (const unsigned char *)ps->end;
    if (p == end || !IS_SPACE[*p]) return; /* most calls: nothing to skip */
    p++;
    while (p < end && IS_SPACE[*p]) p++;
    ps->p = (const char *)p;
}

static inline int peek(Parser *ps) { return ps->p < ps->end ? (unsigned char)*ps->p : -1; }

static inline void decline(Parser *ps) { ps->decline = 1; }

/* ---- strings ---------------------------------------------------------------------------- */

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(const char *p, const char *end) {
    if (end - p < 4) return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval((unsigned char)p[i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Scan a JSON string starting at '"'. Sets *start and *len to the raw content and *escaped when it
   holds a backslash. Validates escapes and control characters. Leaves ps->p after the quote. */
/* bytes that end a plain run inside a JSON string: the quote, a backslash, control characters */
static unsigned char STRING_STOP[256];

static void init_tables(void) {
    for (int c = 0; c < 0x20; c++) STRING_STOP[c] = 1;
    STRING_STOP['"'] = STRING_STOP['\\'] = 1;
    IS_SPACE[' '] = IS_SPACE['\n'] = IS_SPACE['\r'] = IS_SPACE['\t'] = 1;
}

static int scan_string(Parser *ps, const char **start, Py_ssize_t *len, int *escaped) {
    const unsigned char *p = (const unsigned char *)ps->p + 1, *end = (const unsigned char *)ps->end;
    *escaped = 0;
    *start = (const char *)p;
    for (;;) {
        while (end - p >= 4 && !(STRING_STOP[p[0]] | STRING_STOP[p[1]] | STRING_STOP[p[2]] | STRING_STOP[p[3]])) p += 4;
        while (p < end && !STRING_STOP[*p]) p++;
        if (p >= end || *p < 0x20) break;
        if (*p == '"') {
            *len = (const char *)p - *start;
            ps->p = (const char *)p + 1;
            return 0;
        }
        *escaped = 1; /* a backslash */
        if (p + 1 >= end) break;
        unsigned char e = p[1];
        if (e == 'u') {  /* surrogates must come in pairs (msgspec rejects a lone one anywhere) */
            int cp = read_hex4((const char *)p + 2, (const char *)end);
            if (cp < 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) break;
            p += 6;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int low = (end - p >= 6 && p[0] == '\\' && p[1] == 'u') ? read_hex4((const char *)p + 2, (const char *)end) : -1;
                if (low < 0xDC00 || low > 0xDFFF) break;
                p += 6;
            }
        } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
            p += 2;
        } else {
            break;
        }
    }
    decline(ps);
    return -1;
}

static void put_utf8(char **out, uint32_t cp) {
    char *o = *out;
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (char)(0xF0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    }
    *out = o;
}

/* A str from content holding escapes (already validated by scan_string). */
static PyObject *unescape(Parser *ps, const char *s, Py_ssize_t len) {
    char *buf = PyMem_Malloc(len + 1), *o = buf;
    if (!buf) {
        ps->error = 1;
        PyErr_NoMemory();
        return NULL;
    }
    const char *p = s, *end = s + len;
    while (p < end) {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        char e = p[1];
        p += 2;
        switch (e) {
            case 'b': *o++ = '\b'; break;
            case 'f': *o++ = '\f'; break;
            case 'n': *o++ = '\n'; break;
            case 'r': *o++ = '\r'; break;
            case 't': *o++ = '\t'; break;
            case 'u': {
                uint32_t cp = (uint32_t)read_hex4(p, end);
                p += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF) { /* a surrogate pair, or decline */
                    int low = (end - p >= 6 && p[0] == '\\' && p[1] == 'u') ? read_hex4(p + 2, end) : -1;
                    if (low < 0xDC00 || low > 0xDFFF) {
                        PyMem_Free(buf);
                        decline(ps);
                        return NULL;
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)low - 0xDC00);
                    p += 6;
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    PyMem_Free(buf);
                    decline(ps);
                    return NULL;
                }
                put_utf8(&o, cp);
                break;
            }
            default: *o++ = e; break; /* " \ / */
        }
    }
    PyObject *str = PyUnicode_DecodeUTF8(buf, o - buf, NULL);
    PyMem_Free(buf);
    if (!str) {
        PyErr_Clear();
        decline(ps); /* invalid UTF-8: the msgspec path reports or repairs it */
    }
    return str;
}

static int cache_grow(Parser *ps) {
    size_t old_size = ps->cache ? ps->cache_mask + 1 : 0, size = old_size ? old_size * 2 : 4096;
    CacheEntry *table = PyMem_Calloc(size, sizeof(CacheEntry));
    if (!table) {
        ps->error = 1;
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < old_size; i++) {
        CacheEntry *e = &ps->cache[i];
        if (!e->obj) continue;
        size_t j = e->hash & (size - 1), probes = 0;
        while (table[j].obj && ++probes < MAX_PROBES) j = (j + 1) & (size - 1);
        if (table[j].obj) { /* too far from home in the larger table too: drop it from the table */
            Py_DECREF(e->obj);
            ps->cache_used--;
            continue;
        }
        table[j] = *e;
    }
    PyMem_Free(ps->cache);
    ps->cache = table;
    ps->cache_mask = size - 1;
    return 0;
}

/* The bytes of s[0..len) as a word (len <= 8), without reading past them: equal bytes and
   length, equal words (loads of 4 / 2 / 1 bytes, overlapping; no call to memcpy). */
static inline uint64_t short_word(const char *s, Py_ssize_t len) {
    uint32_t a, b;
    if (len >= 4) {
        memcpy(&a, s, 4);
        memcpy(&b, s + len - 4, 4);
        return a | (uint64_t)b << 32;
    }
    if (len == 0) return 0;
    return (uint64_t)(unsigned char)s[0] | (uint64_t)(unsigned char)s[len / 2] << 8 |
           (uint64_t)(unsigned char)s[len - 1] << 16;
}

/* a[0..len) == b[0..len): inline for the short strings of a trace (keys, names), memcmp beyond. */
static inline int same_bytes(const char *a, const char *b, Py_ssize_t len) {
    uint64_t x, y, u, v;
    if (len <= 8) return short_word(a, len) == short_word(b, len);
    if (len > 16) return memcmp(a, b, len) == 0;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    memcpy(&u, a + len - 8, 8);
    memcpy(&v, b + len - 8, 8);
    return ((x ^ y) | (u ^ v)) == 0;
}

/* 64-bit hash of bytes, seeded per process, every input bit mixed into the low bits the table
   uses (murmur3's finalizer after a multiply-xor pass over 8-byte words). */
static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_bytes(uint64_t seed, const char *s, Py_ssize_t len) {
    uint64_t h = mix64(seed ^ ((uint64_t)len * 0x9E3779B97F4A7C15ULL)), word;
    Py_ssize_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&word, s + i, 8);
        h = mix64(h ^ word);
    }
    word = short_word(s + i, len - i);
    return mix64(h ^ word ^ ((uint64_t)(len - i) << 56));
}

/* A str for raw content without escapes; equal contents share one object. New reference. */
static PyObject *cached_str(Parser *ps, const char *s, Py_ssize_t len) {
    uint64_t h = hash_bytes(ps->seed, s, len);
    size_t j = h & ps->cache_mask, probes = 0;
    for (; probes < MAX_PROBES; probes++) {
        ps->probes++;
        CacheEntry *e = &ps->cache[j];
        if (!e->obj) break;
        if (e->hash == h && e->len == len && same_bytes(e->ptr, s, len)) {
            Py_INCREF(e->obj);
            return e->obj;
        }
        j = (j + 1) & ps->cache_mask;
    }
    PyObject *str = PyUnicode_DecodeUTF8(s, len, NULL);
    if (!str) {
        PyErr_Clear();
        decline(ps);
        return NULL;
    }
    if (probes == MAX_PROBES) return str; /* a crowded neighbourhood: this one is not shared */
    if ((ps->cache_used + 1) * 2 > ps->cache_mask + 1) {
        if (cache_grow(ps) < 0) {
            Py_DECREF(str);
            return NULL;
        }
        j = h & ps->cache_mask;
        for (probes = 0; ps->cache[j].obj && probes < MAX_PROBES; probes++) j = (j + 1) & ps->cache_mask;
        if (ps->cache[j].obj) return str;
    }
    Py_ssize_t utf8_len;
    const char *key = PyUnicode_AsUTF8AndSize(str, &utf8_len); /* lives as long as the str */
    if (!key || utf8_len != len) { /* cannot happen for valid UTF-8; then not shared */
        PyErr_Clear();
        return str;
    }
    ps->cache[j] = (CacheEntry){h, key, len, str};
    Py_INCREF(str); /* one reference held by the cache */
    ps->cache_used++;
    return str;
}

static PyObject *read_str(Parser *ps) {
    const char *s;
    Py_ssize_t len;
    int escaped;
    if (scan_string(ps, &s, &len, &escaped) < 0) return NULL;
    return escaped ? unescape(ps, s, len) : cached_str(ps, s, len);
}

/* ---- numbers ---------------------------------------------------------------------------- */

typedef struct {
    const char *start;
    Py_ssize_t len;
    int negative;
    const char *int_digits;
    Py_ssize_t n_int;
    const char *frac_digits;
    Py_ssize_t n_frac;
    int has_exp;
} Number;

/* JSON number grammar, strictly: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? */
static int scan_number(Parser *ps, Number *n) {
    const char *p = ps->p, *end = ps->end;
    memset(n, 0, sizeof(*n));
    n->start = p;
    if (p < end && *p == '-') {
        n->negative = 1;
        p++;
    }
    n->int_digits = p;
    if (p < end && *p == '0') {
        p++;
    } else if (p < end && *p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        goto bad;
    }
    n->n_int = p - n->int_digits;
    if (p < end && *p == '.') {
        p++;
        n->frac_digits = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        n->n_frac = p - n->frac_digits;
        if (n->n_frac == 0) goto bad;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        n->has_exp = 1;
        if (p < end && (*p == '+' || *p == '-')) p++;
        const char *digits = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == digits) goto bad;
    }
    if (p < end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' || *p == '-' || *p == '+')) goto bad;
    n->len = p - n->start;
    ps->p = p;
    return 0;
bad:
    decline(ps);
    return -1;
}

/* Eight ASCII digits at once (little-endian loads; the method of simdjson and fast_float). */
static inline int eight_digits(uint64_t v) {
    return ((v & 0xF0F0F0F0F0F0F0F0ull) | (((v + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) >> 4)) ==
           0x3333333333333333ull;
}

static inline uint64_t eight_digits_value(uint64_t v) {
    v -= 0x3030303030303030ull;
    v = v * 10 + (v >> 8);
    return (((v & 0x000000FF000000FFull) * 0x000F424000000064ull) +
            (((v >> 16) & 0x000000FF000000FFull) * 0x0000271000000001ull)) >> 32;
}

/* The value of n digits (n <= 18). */
static int64_t digits_value(const char *s, Py_ssize_t n) {
    int64_t v = 0;
    Py_ssize_t i = 0;
#if PY_LITTLE_ENDIAN
    for (uint64_t w; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        v = v * 100000000 + (int64_t)eight_digits_value(w);
    }
#endif
    for (; i < n; i++) v = v * 10 + (s[i] - '0');
    return v;
}

/* A JSON integer of at most 18 digits as a Python int (small values reused); else decline. */
static PyObject *int_object(Parser *ps, const Number *n) {
    if (n->n_frac || n->has_exp || n->n_int > 18) {
        decline(ps);
        return NULL;
    }
    int64_t v = digits_value(n->int_digits, n->n_int);
    if (n->negative) v = -v;
    size_t slot = (size_t)v & 1023;
    if (ps->int_cache[slot] && ps->int_keys[slot] == v) {
        Py_INCREF(ps->int_cache[slot]);
        return ps->int_cache[slot];
    }
    PyObject *obj = PyLong_FromLongLong(v);
    if (!obj) {
        ps->error = 1;
        return NULL;
    }
    Py_XSETREF(ps->int_cache[slot], obj);
    ps->int_keys[slot] = v;
    Py_INCREF(obj);
    return obj;
}

/* Any JSON number as a float (msgspec's float type accepts integers too); decline on overflow. */
static PyObject *float_object(Parser *ps, const Number *n) {
    char buf[64];
    if (n->len >= (Py_ssize_t)sizeof(buf)) {
        decline(ps);
        return NULL;
    }
    memcpy(buf, n->start, n->len);
    buf[n->len] = 0;
    double v = PyOS_string_to_double(buf, NULL, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        decline(ps);
        return NULL;
    }
    if (!isfinite(v)) {
        decline(ps);
        return NULL;
    }
    if (v == 0.0 && !n->n_frac && !n->has_exp) v = 0.0; /* "-0" is the integer 0, then 0.0 */
    PyObject *obj = PyFloat_FromDouble(v);
    if (!obj) ps->error = 1;
    return obj;
}

/* ---- generic values --------------------------------------------------------------------- */

static int expect_literal(Parser *ps, const char *word) {
    size_t len = strlen(word);
    if ((size_t)(ps->end - ps->p) < len || memcmp(ps->p, word, len) != 0) {
        decline(ps);
        return -1;
    }
    ps->p += len;
    return 0;
}

/* After a member or an element: 1 when a ',' announces another (the parser then on it), 0 past
   the ``close`` bracket, -1 on anything else. */
static inline int next_item(Parser *ps, char close) {
    skip_ws(ps);
    int c = peek(ps);
    if (c != ',' && c != close) return -1;
    ps->p++;
    if (c == close) return 0;
    skip_ws(ps);
    return 1;
}

/* Walk one JSON value, validated: 0, or -1 declined (no object made, no GIL needed). */
static int skip_value(Parser *ps, int depth) {
    if (depth > MAX_DEPTH) {
        decline(ps);
        return -1;
    }
    int c = peek(ps);
    const char *s;
    Py_ssize_t len;
    int escaped;
    if (c == '"') return scan_string(ps, &s, &len, &escaped);
    if (c == 't') return expect_literal(ps, "true");
    if (c == 'f') return expect_literal(ps, "false");
    if (c == 'n') return expect_literal(ps, "null");
    if (c != '{' && c != '[') {
        Number n;
        return scan_number(ps, &n);
    }
    char close = c == '{' ? '}' : ']';
    ps->p++;
    skip_ws(ps);
    if (peek(ps) == close) {
        ps->p++;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            if (peek(ps) != '"' || scan_string(ps, &s, &len, &escaped) < 0) break;
            skip_ws(ps);
            if (peek(ps) != ':') break;
            ps->p++;
            skip_ws(ps);
        }
        if (skip_value(ps, depth + 1) < 0) return -1;
        int more = next_item(ps, close);
        if (more < 0) break;
        if (!more) return 0;
    }
    decline(ps);
    return -1;
}

/* Read one JSON value as a new Python object. NULL on decline or error. */
static PyObject *value(Parser *ps, int depth);

static PyObject *container(Parser *ps, int depth, int is_object) {
    char close = is_object ? '}' : ']';
    PyObject *out = is_object ? PyDict_New() : PyList_New(0);
    if (!out) {
        ps->error = 1;
        return NULL;
    }
    ps->p++;
    skip_ws(ps);
    if (peek(ps) == close) {
        ps->p++;
        return out;
    }
    for (;;) {
        PyObject *key = NULL;
        if (is_object) {
            if (peek(ps) != '"') goto bad;
            key = read_str(ps);
            if (!key) goto fail;
            skip_ws(ps);
            if (peek(ps) != ':') {
                Py_DECREF(key);
                goto bad;
            }
            ps->p++;
            skip_ws(ps);
        }
        PyObject *item = value(ps, depth + 1);
        if (!item) {
            Py_XDECREF(key);
            goto fail;
        }
        int rc = is_object ? PyDict_SetItem(out, key, item) : PyList_Append(out, item);
        Py_XDECREF(key);
        Py_DECREF(item);
        if (rc < 0) {
            ps->error = 1;
            goto fail;
        }
        int more = next_item(ps, close);
        if (more < 0) goto bad;
        if (!more) break;
    }
    return out;
bad:
    decline(ps);
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *value(Parser *ps, int depth) {
    if (depth > MAX_DEPTH) {
        decline(ps);
        return NULL;
    }
    int c = peek(ps);
    if (c == '"') return read_str(ps);
    if (c == '{' || c == '[') return container(ps, depth, c == '{');
    if (c == 't') return expect_literal(ps, "true") < 0 ? NULL : Py_NewRef(Py_True);
    if (c == 'f') return expect_literal(ps, "false") < 0 ? NULL : Py_NewRef(Py_False);
    if (c == 'n') return expect_literal(ps, "null") < 0 ? NULL : Py_NewRef(Py_None);
    Number n;
    if (scan_number(ps, &n) < 0) return NULL;
    return (n.n_frac || n.has_exp) ? float_object(ps, &n) : int_object(ps, &n);
}

/* ---- typed fields ----------------------------------------------------------------------- */

static PyObject *int_tuple(Parser *ps) {
    PyObject *list = value(ps, 1);
    if (!list) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyLong_CheckExact(PyList_GET_ITEM(list, i))) { /* msgspec: tuple[int, ...] only */
            Py_DECREF(list);
            decline(ps);
            return NULL;
        }
    }
    PyObject *tuple = PyList_AsTuple(list);
    Py_DECREF(list);
    if (!tuple) ps->error = 1;
    return tuple;
}

/* One value of a field of the given kind; NULL on decline / error. */
static PyObject *typed_value(Parser *ps, enum kind kind) {
    int c = peek(ps);
    switch (kind) {
        case K_ANY:
            return value(ps, 1);
        case K_RAW: { /* the value's JSON text, as written (equal texts share one str) */
            const char *start = ps->p;
            if (skip_value(ps, 1) < 0) return NULL;
            return cached_str(ps, start, ps->p - start);
        }
        case K_PHASE: {
            const char *s;
            Py_ssize_t len;
            int escaped;
            if (c != '"' || scan_string(ps, &s, &len, &escaped) < 0) break;
            if (escaped || len > 1) break;
            int ch = len ? (unsigned char)s[0] : 0;
            if (len && (ch >= 128 || !strchr(PHASES, ch))) break;
            PyObject *obj = ps->phase_obj[ch];
            if (!obj) {
                obj = PyUnicode_FromStringAndSize(s, len);
                if (!obj) {
                    ps->error = 1;
                    return NULL;
                }
                PyUnicode_InternInPlace(&obj);
                ps->phase_obj[ch] = obj;
            }
            return Py_NewRef(obj);
        }
        case K_OPT_STR:
            if (c == '"') return read_str(ps);
            if (c == 'n') return expect_literal(ps, "null") < 0 ? NULL : Py_NewRef(Py_None);
            break;
        case K_INT_STR_NULL:
        case K_INT_STR:
            if (c == '"') return read_str(ps);
            if (c == 'n' && kind == K_INT_STR_NULL) return expect_literal(ps, "null") < 0 ? NULL : Py_NewRef(Py_None);
            if (c == '-' || (c >= '0' && c <= '9')) {
                Number n;
                if (scan_number(ps, &n) < 0) return NULL;
                return int_object(ps, &n);
            }
            break;
        case K_FLOAT_STR:
            if (c == '"') return read_str(ps);
            if (c == '-' || (c >= '0' && c <= '9')) {
                Number n;
                if (scan_number(ps, &n) < 0) return NULL;
                return float_object(ps, &n);
            }
            break;
        case K_TUPLE_STR_NULL:
            if (c == '"') return read_str(ps);
            if (c == 'n') return expect_literal(ps, "null") < 0 ? NULL : Py_NewRef(Py_None);
            if (c == '[') return int_tuple(ps);
            break;
    }
    decline(ps);
    return NULL;
}

/* ts / dur: a number of microseconds below 9e15 with at most 12 decimals becomes int64 ns,
   truncated toward zero (state 1; 2 when nonzero digits below a nanosecond were dropped, which
   the msgspec path counts the same way); null is invalid (state 0, as a missing key is);
   anything else declines. */
static int read_time(Parser *ps, int64_t *ns, uint8_t *state) {
    int c = peek(ps);
    if (c == 'n') {
        if (expect_literal(ps, "null") < 0) return -1;
        *ns = 0;
        *state = 0;
        return 0;
    }
    Number n;
    if (!(c == '-' || (c >= '0' && c <= '9')) || scan_number(ps, &n) < 0 || n.has_exp || n.n_frac > 12 || n.n_int > 16) {
        decline(ps);
        return -1;
    }
    int64_t us = digits_value(n.int_digits, n.n_int);
    if (us >= 9000000000000000LL) {
        decline(ps);
        return -1;
    }
    Py_ssize_t kept = n.n_frac < 3 ? n.n_frac : 3;
    int64_t frac = digits_value(n.frac_digits, kept);
    for (Py_ssize_t i = kept; i < 3; i++) frac *= 10;
    *state = 1;
    for (Py_ssize_t i = 3; i < n.n_frac; i++)
        if (n.frac_digits[i] != '0') *state = 2;
    int64_t v = us * 1000 + frac;
    *ns = n.negative ? -v : v;
    return 0;
}

/* ---- events ----------------------------------------------------------------------------- */

static int find_field(const FieldIndex *index, const char *key, Py_ssize_t len) {
    const FieldSpec *specs = index->specs;
    if (len < LEN_SLOTS) {
        for (int i = index->first_of_len[len]; i >= 0; i = specs[i].next_same_len)
            if (specs[i].key[0] == key[0] && same_bytes(specs[i].key, key, len)) return i;
        return -1;
    }
    for (size_t i = 0; i < index->n; i++)
        if (specs[i].key_len == len && memcmp(specs[i].key, key, len) == 0) return (int)i;
    return -1;
}

/* Store a new reference as the current row's value of a column (the last of repeated keys wins). */
static int set_slot(Parser *ps, Column *col, PyObject *v) {
    if (v && col->typed) col->has_obj = 1;
    if (col->count && col->rows[col->count - 1] == (int32_t)ps->rows) {
        drop_slot(col->vals[col->count - 1]);
        col->vals[col->count - 1] = v;
        return 0;
    }
    if (col->count == col->cap) { /* raw memory: a stream reads without the GIL */
        Py_ssize_t cap = col->cap ? col->cap * 2 : 64;
        int32_t *rows = PyMem_RawRealloc(col->rows, cap * sizeof(int32_t));
        if (rows) col->rows = rows;
        PyObject **vals = rows ? PyMem_RawRealloc(col->vals, cap * sizeof(PyObject *)) : NULL;
        if (vals) col->vals = vals;
        int64_t *ints = vals && col->typed ? PyMem_RawRealloc(col->ints, cap * sizeof(int64_t)) : NULL;
        if (ints) col->ints = ints;
        if (!vals || (col->typed && !ints)) {
            drop_slot(v);
            out_of_memory(ps);
            return -1;
        }
        col->cap = cap;
    }
    col->rows[col->count] = (int32_t)ps->rows;
    col->vals[col->count++] = v;
    return 0;
}

/* An integer of a typed column: kept as int64, no object (at most 18 digits, else decline). */
static int set_int_slot(Parser *ps, Column *col) {
    Number n;
    if (scan_number(ps, &n) < 0) return -1;
    if (n.n_frac || n.has_exp || n.n_int > 18) {
        decline(ps);
        return -1;
    }
    int64_t v = digits_value(n.int_digits, n.n_int);
    if (set_slot(ps, col, NULL) < 0) return -1;
    col->ints[col->count - 1] = n.negative ? -v : v;
    return 0;
}

/* The members of a JSON object (at its '{'), each key handed to ``member`` with the parser on
   its value; keys written with escapes decline. */
static inline int read_object(Parser *ps, int (*member)(Parser *, const char *, Py_ssize_t)) {
    if (peek(ps) != '{') {
        decline(ps);
        return -1;
    }
    ps->p++;
    skip_ws(ps);
    if (peek(ps) == '}') {
        ps->p++;
        return 0;
    }
    for (;;) {
        const char *key;
        Py_ssize_t len;
        int escaped;
        if (peek(ps) != '"' || scan_string(ps, &key, &len, &escaped) < 0 || escaped) break;
        skip_ws(ps);
        if (peek(ps) != ':') break;
        ps->p++;
        skip_ws(ps);
        if (member(ps, key, len) < 0) return -1;
        int more = next_item(ps, '}');
        if (more == 0) return 0;
        if (more < 0) break;
    }
    decline(ps);
    return -1;
}

/* ---- deferred values ----------------------------------------------------------------- */

/* The value table twice as large (4096 slots at first): 0, or -1 out of memory. */
static int value_table_grow(Parser *ps) {
    size_t old_size = ps->vslots ? ps->vslots_mask + 1 : 0, size = old_size ? old_size * 2 : 4096;
    ValueSlot *table = PyMem_RawMalloc(size * sizeof(ValueSlot));
    if (!table) return -1;
    for (size_t i = 0; i < size; i++) table[i].id = -1;
    ps->vslots_used = 0;
    for (size_t i = 0; i < old_size; i++) {
        ValueSlot *e = &ps->vslots[i];
        if (e->id < 0) continue;
        size_t j = e->hash & (size - 1), probes = 0;
        while (table[j].id >= 0 && ++probes < MAX_PROBES) j = (j + 1) & (size - 1);
        if (table[j].id >= 0) continue; /* too far from home: no longer shared (its id stays) */
        table[j] = *e;
        ps->vslots_used++;
    }
    PyMem_RawFree(ps->vslots);
    ps->vslots = table;
    ps->vslots_mask = size - 1;
    return 0;
}

/* The id of the value of ``kind`` written s[0..len): equal texts of one kind, one id (within
   MAX_PROBES slots, as the string table); a new text is copied into the arena. -1: no memory. */
static Py_ssize_t value_id(Parser *ps, enum kind kind, const char *s, Py_ssize_t len) {
    uint64_t h = hash_bytes(ps->seed ^ ((uint64_t)kind << 59), s, len);
    size_t j = h & ps->vslots_mask, probes = 0;
    for (; probes < MAX_PROBES; probes++) {
        ps->probes++;
        const ValueSlot *e = &ps->vslots[j];
        if (e->id < 0) break;
        ValueText *t = &ps->vtexts[e->id];
        if (e->hash == h && t->len == len && t->kind == kind && same_bytes(ps->arena + t->off, s, len)) {
            t->provisional = 0; /* met again: a value some row holds */
            return e->id;
        }
        j = (j + 1) & ps->vslots_mask;
    }
    if (ps->n_vtexts == ps->vtexts_cap) {
        Py_ssize_t cap = ps->vtexts_cap ? ps->vtexts_cap * 2 : 1024;
        ValueText *texts = PyMem_RawRealloc(ps->vtexts, cap * sizeof(ValueText));
        if (!texts) return -1;
        ps->vtexts = texts;
        ps->vtexts_cap = cap;
    }
    if (ps->arena_cap - ps->arena_len < (size_t)len) {
        size_t cap = ps->arena_cap ? ps->arena_cap * 2 : 65536;
        while (cap - ps->arena_len < (size_t)len) cap *= 2;
        char *arena = PyMem_RawRealloc(ps->arena, cap);
        if (!arena) return -1;
        ps->arena = arena;
        ps->arena_cap = cap;
    }
    memcpy(ps->arena + ps->arena_len, s, (size_t)len);
    Py_ssize_t id = ps->n_vtexts++;
    ps->vtexts[id] = (ValueText){ps->arena_len, len, kind, 0};
    ps->arena_len += (size_t)len;
    if (probes == MAX_PROBES) return id; /* a crowded neighbourhood: this one is not shared */
    if ((ps->vslots_used + 1) * 2 > ps->vslots_mask + 1) {
        if (value_table_grow(ps) < 0) return -1;
        j = h & ps->vslots_mask;
        for (probes = 0; ps->vslots[j].id >= 0 && probes < MAX_PROBES; probes++) j = (j + 1) & ps->vslots_mask;
        if (ps->vslots[j].id >= 0) return id;
    }
    ps->vslots[j] = (ValueSlot){h, id};
    ps->vslots_used++;
    return id;
}

/* Deferred mode: a field's value walked and kept as the tag of its id (its kind is checked when
   its object is made: materialize). NULL on decline or no memory. */
static PyObject *deferred_value(Parser *ps, enum kind kind) {
    const char *start = ps->p;
    if (skip_value(ps, 1) < 0) return NULL;
    Py_ssize_t id = value_id(ps, kind, start, ps->p - start);
    if (id < 0) {
        out_of_memory(ps);
        return NULL;
    }
    return TAG(id);
}

/* The object of each deferred value of ``ps`` (``typed_value`` over its text, made by ``maker``:
   its string table and small integers, so that two parsers' equal strings are one object):
   0, or -1 when a value is not of its field's kind (``maker`` declined) or on an error. A value
   met only in an event a stream's piece cut (read again whole since, perhaps longer: forget_row
   drops its slot, not its text) is not anyone's: left NULL, it declines nothing. No slot holds
   such a value: meeting a text again (value_id) makes it no longer provisional. */
static int materialize(Parser *ps, Parser *maker) {
    if (ps->vobjs || !ps->n_vtexts) return 0;
    ps->vobjs = PyMem_Calloc((size_t)ps->n_vtexts, sizeof(PyObject *));
    if (!ps->vobjs) {
        PyErr_NoMemory();
        maker->error = 1;
        return -1;
    }
    int deferred = maker->deferred, status = 0;
    maker->deferred = 0;
    for (Py_ssize_t id = 0; id < ps->n_vtexts; id++) {
        const ValueText *t = &ps->vtexts[id];
        maker->p = ps->arena + t->off;
        maker->end = maker->p + t->len;
        int declined = maker->decline;
        PyObject *obj = typed_value(maker, t->kind);
        if (obj && maker->p != maker->end) { /* cannot happen: the text is one value */
            Py_CLEAR(obj);
            decline(maker);
        }
        if (!obj && !maker->error && t->provisional) {
            maker->decline = declined;
            continue;
        }
        if (!obj) {
            status = -1;
            break;
        }
        ps->vobjs[id] = obj;
    }
    maker->p = maker->end = NULL;
    maker->deferred = deferred;
    return status;
}

/* A typed field's value into the current row of its column, or an unknown key's value walked. */
static int read_member(Parser *ps, const FieldIndex *index, Column *cols, const char *key, Py_ssize_t len) {
    int f = find_field(index, key, len);
    if (f < 0) return skip_value(ps, 2);
    if (cols[f].typed) {
        int c = peek(ps);
        if (c == '-' || (c >= '0' && c <= '9')) return set_int_slot(ps, &cols[f]);
    }
    enum kind kind = index->specs[f].kind;
    PyObject *v = ps->deferred ? deferred_value(ps, kind) : typed_value(ps, kind);
    return v ? set_slot(ps, &cols[f], v) : -1;
}

static int args_member(Parser *ps, const char *key, Py_ssize_t len) {
    return read_member(ps, &ps->args_index, ps->args_cols, key, len);
}

static int read_args(Parser *ps) {
    for (size_t i = 0; ps->args_row == ps->rows && i < ps->n_args; i++) { /* a repeated "args" key
        replaces the whole struct (looked for only in a row whose args may have been read) */
        Column *col = &ps->args_cols[i];
        if (col->count && col->rows[col->count - 1] == (int32_t)ps->rows) drop_slot(col->vals[--col->count]);
    }
    ps->args_row = ps->rows;
    if (peek(ps) == 'n') return expect_literal(ps, "null");
    return read_object(ps, args_member);
}

static int event_member(Parser *ps, const char *key, Py_ssize_t len) {
    Py_ssize_t row = ps->rows;
    if (len == 2 && key[0] == 't' && key[1] == 's') return read_time(ps, &ps->ts[row], &ps->ts_valid[row]);
    if (len == 3 && memcmp(key, "dur", 3) == 0) return read_time(ps, &ps->dur[row], &ps->dur_valid[row]);
    if (len == 4 && memcmp(key, "args", 4) == 0) return read_args(ps);
    return read_member(ps, &ps->event_index, ps->event_cols, key, len);
}

/* One event object into row ``ps->rows`` of every column. */
static int read_event(Parser *ps) { return read_object(ps, event_member); }

static void *grow(void *old, Py_ssize_t old_cap, Py_ssize_t cap, size_t item) {
    if (!old) return PyMem_RawCalloc(cap, item); /* fresh zero pages: only the rows used are touched */
    char *mem = PyMem_RawRealloc(old, cap * item);
    if (mem) memset(mem + old_cap * item, 0, (cap - old_cap) * item);
    return mem;
}

/* Make room for ``cap`` rows in the time arrays (new rows zeroed: invalid time). */
static int reserve(Parser *ps, Py_ssize_t cap) {
    if (cap > INT32_MAX) { /* rows are numbered in int32 */
        decline(ps);
        return -1;
    }
    void **arrays[4] = {(void **)&ps->ts, (void **)&ps->dur, (void **)&ps->ts_valid, (void **)&ps->dur_valid};
    size_t sizes[4] = {sizeof(int64_t), sizeof(int64_t), 1, 1};
    for (int i = 0; i < 4; i++) {
        void *mem = grow(*arrays[i], ps->cap, cap, sizes[i]);
        if (!mem) {
            out_of_memory(ps);
            return -1;
        }
        *arrays[i] = mem;
    }
    ps->cap = cap;
    return 0;
}

static int read_events(Parser *ps) {
    skip_ws(ps);
    if (peek(ps) != '[') goto bad;
    ps->p++;
    skip_ws(ps);
    if (peek(ps) == ']') {
        ps->p++;
    } else {
        for (;;) {
            if (ps->rows == ps->cap && reserve(ps, ps->cap * 2) < 0) return -1;
            if (read_event(ps) < 0) return -1;
            ps->rows++;
            int more = next_item(ps, ']');
            if (more < 0) goto bad;
            if (!more) break;
        }
    }
    skip_ws(ps);
    if (ps->p == ps->end) return 0;
bad:
    decline(ps);
    return -1;
}

/* ---- result ----------------------------------------------------------------------------- */

/* Release a column's values and memory (it is then empty). */
static void free_column(Column *col) {
    for (Py_ssize_t k = 0; k < col->count; k++) drop_slot(col->vals[k]);
    PyMem_RawFree(col->rows);
    PyMem_RawFree(col->vals);
    PyMem_RawFree(col->ints);
    col->rows = NULL;
    col->vals = NULL;
    col->ints = NULL;
    col->count = col->cap = 0;
}

/* The rows of a parse: its own, then those of the parsers joined after it (stream_join), each
   part's rows numbered after the previous parts'. Column ``i`` of a part: cols_of(part)[i]. */
static Py_ssize_t total_rows(const Parser *ps) {
    Py_ssize_t n = 0;
    for (; ps; ps = ps->next) n += ps->rows;
    return n;
}

static Column *column_of(const Parser *ps, int is_event, size_t i) {
    return is_event ? &ps->event_cols[i] : &ps->args_cols[i];
}

/* (codes, distinct) of column ``i``: each row's object (its value, or the default) numbered by
   identity in order of first appearance (int32 bytes), and the distinct objects. Equal values are
   nearly always one object here (strings are shared, small integers reused); the caller merges
   the rare others. */
static PyObject *identity_codes(Parser *ps, int is_event, size_t i, PyObject *dflt) {
    size_t size = 64, used = 0;
    Py_ssize_t n = total_rows(ps), base = 0;
    PyObject **keys = PyMem_Calloc(size, sizeof(PyObject *));
    int32_t *slot_code = PyMem_Malloc(size * sizeof(int32_t));
    PyObject *codes = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    PyObject *distinct = PyList_New(0);
    PyObject *out = NULL;
    if (!keys || !slot_code || !codes || !distinct) goto done;
    int32_t *code_of_row = (int32_t *)PyBytes_AS_STRING(codes);
    for (Parser *part = ps; part; base += part->rows, part = part->next) {
        const Column *col = column_of(part, is_event, i);
        Py_ssize_t k = 0;
        for (Py_ssize_t r = 0; r < part->rows; r++) {
            PyObject *obj = (k < col->count && col->rows[k] == r) ? slot_object(part, col->vals[k++]) : dflt;
            size_t j = (size_t)(((uintptr_t)obj >> 4) * 0x9E3779B97F4A7C15ULL) & (size - 1);
            while (keys[j] && keys[j] != obj) j = (j + 1) & (size - 1);
            if (!keys[j]) {
                if (PyList_Append(distinct, obj) < 0) goto done;
                keys[j] = obj;
                slot_code[j] = (int32_t)used++;
                if (used * 2 > size) { /* rehash into a table twice as large */
                    size_t old_size = size;
                    PyObject **old_keys = keys;
                    int32_t *old_codes = slot_code;
                    size *= 2;
                    keys = PyMem_Calloc(size, sizeof(PyObject *));
                    slot_code = PyMem_Malloc(size * sizeof(int32_t));
                    if (!keys || !slot_code) {
                        PyMem_Free(old_keys);
                        PyMem_Free(old_codes);
                        goto done;
                    }
                    for (size_t m0 = 0; m0 < old_size; m0++) {
                        if (!old_keys[m0]) continue;
                        size_t m = (size_t)(((uintptr_t)old_keys[m0] >> 4) * 0x9E3779B97F4A7C15ULL) & (size - 1);
                        while (keys[m]) m = (m + 1) & (size - 1);
                        keys[m] = old_keys[m0];
                        slot_code[m] = old_codes[m0];
                    }
                    PyMem_Free(old_keys);
                    PyMem_Free(old_codes);
                    code_of_row[base + r] = (int32_t)(used - 1);
                    continue;
                }
            }
            code_of_row[base + r] = slot_code[j];
        }
    }
    out = PyTuple_Pack(2, codes, distinct);
done:
    if (!out && !PyErr_Occurred()) PyErr_NoMemory();
    PyMem_Free(keys);
    PyMem_Free(slot_code);
    Py_XDECREF(codes);
    Py_XDECREF(distinct);
    return out;
}

/* Column ``i`` as the caller gets it (the values move out of it): a list of one value per row
   when at least half the rows hold the key, else (rows as int32 bytes, values). A typed column
   without text: (None, int64 per row), or sparse (rows as int32 bytes, int64 of their values). */
static PyObject *column_object(Parser *ps, int is_event, size_t i, PyObject *dflt) {
    Py_ssize_t n = total_rows(ps), count = 0, base = 0;
    int typed = column_of(ps, is_event, i)->typed, has_obj = 0;
    for (Parser *part = ps; part; part = part->next) {
        Column *col = column_of(part, is_event, i);
        count += col->count;
        has_obj |= col->has_obj;
    }
    int dense = count * 2 >= n, ints = typed && !has_obj;
    PyObject *rows = dense ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int32_t));
    PyObject *values = !rows ? NULL
                       : ints ? PyBytes_FromStringAndSize(NULL, (dense ? n : count) * (Py_ssize_t)sizeof(int64_t))
                              : PyList_New(dense ? n : count);
    if (!values) {
        Py_XDECREF(rows);
        return NULL;
    }
    int32_t *row_of = dense ? NULL : (int32_t *)PyBytes_AS_STRING(rows);
    int64_t *v = ints ? (int64_t *)PyBytes_AS_STRING(values) : NULL;
    Py_ssize_t out_k = 0; /* sparse: the next output slot */
    for (Parser *part = ps; part; base += part->rows, part = part->next) {
        Column *col = column_of(part, is_event, i);
        for (Py_ssize_t k = 0; typed && !ints && k < col->count; k++) { /* text among the integers */
            if (col->vals[k]) continue;
            col->vals[k] = PyLong_FromLongLong(col->ints[k]);
            if (!col->vals[k]) goto fail;
        }
        Py_ssize_t k = 0;
        if (dense) {
            for (Py_ssize_t r = 0; r < part->rows; r++) {
                int held = k < col->count && col->rows[k] == r;
                if (ints) {
                    v[base + r] = held ? col->ints[k] : col->int_dflt;
                } else {
                    PyObject *obj = held ? col->vals[k] : NULL;
                    PyList_SET_ITEM(values, base + r, held ? (IS_TAG(obj) ? Py_NewRef(slot_object(part, obj)) : obj) : Py_NewRef(dflt));
                }
                k += held;
            }
        } else {
            for (; k < col->count; k++, out_k++) {
                row_of[out_k] = (int32_t)(base + col->rows[k]);
                if (ints) v[out_k] = col->ints[k];
                else PyList_SET_ITEM(values, out_k, IS_TAG(col->vals[k]) ? Py_NewRef(slot_object(part, col->vals[k])) : col->vals[k]);
            }
        }
        if (!ints) col->count = 0; /* the list holds the references now */
    }
    PyObject *out = PyTuple_Pack(2, rows, values);
    if (out && !ints && dense) { /* a list alone */
        Py_DECREF(out);
        out = Py_NewRef(values);
    }
    Py_DECREF(rows);
    Py_DECREF(values);
    return out;
fail:
    Py_DECREF(rows);
    Py_DECREF(values); /* the slots not filled are NULL: a list frees them as such */
    return NULL;
}

/* {attribute name: column} for the fields that a row holds. With ``coded``, also
   {attribute name: (codes, distinct)} for JSON-text columns and, of the event fields, text and
   pid / tid columns. */
static PyObject *columns_dict(Parser *ps, const FieldSpec *specs, size_t n, PyObject *coded, int is_event) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (size_t i = 0; i < n; i++) {
        Py_ssize_t count = 0;
        for (Parser *part = ps; part; part = part->next) count += column_of(part, is_event, i)->count;
        if (!count) continue;
        enum kind kind = specs[i].kind;
        int rc = 0;
        int codes_only = is_event && (kind == K_PHASE || kind == K_OPT_STR || kind == K_INT_STR_NULL);
        if (coded && (kind == K_RAW || codes_only)) {
            PyObject *pair = identity_codes(ps, is_event, i, specs[i].dflt);
            rc = pair ? PyDict_SetItem(coded, specs[i].name, pair) : -1;
            Py_XDECREF(pair);
        }
        if (rc == 0 && !(coded && codes_only)) { /* text and id event fields: their codes alone */
            PyObject *column = column_object(ps, is_event, i, specs[i].dflt);
            rc = column ? PyDict_SetItem(d, specs[i].name, column) : -1;
            Py_XDECREF(column);
        }
        for (Parser *part = ps; part; part = part->next) free_column(column_of(part, is_event, i)); /* now: a lower peak */
        if (rc < 0) goto fail;
    }
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

/* The parts' time arrays joined: bytes of ``item`` bytes per row. */
static PyObject *joined_times(Parser *ps, size_t offset, size_t item) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, total_rows(ps) * (Py_ssize_t)item);
    if (!out) return NULL;
    char *o = PyBytes_AS_STRING(out);
    for (Parser *part = ps; part; part = part->next) {
        const char *array = *(char *const *)((const char *)part + offset);
        memcpy(o, array, (size_t)part->rows * item);
        o += (size_t)part->rows * item;
    }
    return out;
}

static PyObject *result(Parser *ps) {
    for (Parser *part = ps; part; part = part->next)
        if (materialize(part, ps) < 0) return NULL;
    PyObject *coded = PyDict_New();
    PyObject *args_coded = coded ? PyDict_New() : NULL;
    PyObject *fields = args_coded ? columns_dict(ps, ps->event_specs, ps->n_event, coded, 1) : NULL;
    PyObject *args = fields ? columns_dict(ps, ps->args_specs, ps->n_args, args_coded, 0) : NULL;
    PyObject *ts = args ? joined_times(ps, offsetof(Parser, ts), sizeof(int64_t)) : NULL;
    PyObject *ts_valid = ts ? joined_times(ps, offsetof(Parser, ts_valid), 1) : NULL;
    PyObject *dur = ts_valid ? joined_times(ps, offsetof(Parser, dur), sizeof(int64_t)) : NULL;
    PyObject *dur_valid = dur ? joined_times(ps, offsetof(Parser, dur_valid), 1) : NULL;
    Py_ssize_t probes = 0;
    for (Parser *part = ps; part; part = part->next) probes += part->probes;
    PyObject *out = NULL;
    if (dur_valid) {
        out = Py_BuildValue("{s:n,s:n,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O}", "n", total_rows(ps), "string_probes", probes,
                            "fields", fields, "coded", coded, "args", args, "args_coded", args_coded,
                            "ts", ts, "ts_valid", ts_valid, "dur", dur, "dur_valid", dur_valid);
    }
    Py_XDECREF(coded);
    Py_XDECREF(args_coded);
    Py_XDECREF(fields);
    Py_XDECREF(args);
    Py_XDECREF(ts);
    Py_XDECREF(ts_valid);
    Py_XDECREF(dur);
    Py_XDECREF(dur_valid);
    return out;
}

static void parser_free(Parser *ps) {
    if (ps->next) { /* the parts joined after it */
        parser_free(ps->next);
        PyMem_Free(ps->next);
        ps->next = NULL;
    }
    for (size_t i = 0; ps->cache && i <= ps->cache_mask; i++) Py_XDECREF(ps->cache[i].obj);
    PyMem_Free(ps->cache);
    clear_objs(ps->int_cache, 1024);
    clear_objs(ps->phase_obj, 128);
    for (size_t i = 0; ps->event_cols && i < ps->n_event; i++) free_column(&ps->event_cols[i]);
    for (size_t i = 0; ps->args_cols && i < ps->n_args; i++) free_column(&ps->args_cols[i]);
    PyMem_Free(ps->event_cols);
    PyMem_Free(ps->args_cols);
    PyMem_Free(ps->event_specs);
    PyMem_Free(ps->args_specs);
    PyMem_RawFree(ps->ts);
    PyMem_RawFree(ps->dur);
    PyMem_RawFree(ps->ts_valid);
    PyMem_RawFree(ps->dur_valid);
    PyMem_RawFree(ps->vslots);
    PyMem_RawFree(ps->vtexts);
    PyMem_RawFree(ps->arena);
    if (ps->vobjs) clear_objs(ps->vobjs, (size_t)ps->n_vtexts);
    PyMem_Free(ps->vobjs);
}

/* The fields of a spec tuple ((key, name, kind, default), ...) and their empty columns. */
static int read_spec(Parser *ps, PyObject *spec, FieldSpec **specs, Column **cols, size_t *n, FieldIndex *index) {
    if (!PyTuple_Check(spec)) {
        PyErr_SetString(PyExc_TypeError, "a spec is a tuple of (key, name, kind, default)");
        return -1;
    }
    *n = (size_t)PyTuple_GET_SIZE(spec);
    *specs = PyMem_Calloc(*n ? *n : 1, sizeof(FieldSpec));
    *cols = PyMem_Calloc(*n ? *n : 1, sizeof(Column));
    if (!*specs || !*cols) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < *n; i++) {
        PyObject *item = PyTuple_GET_ITEM(spec, i), *key, *name, *dflt;
        int kind;
        if (!PyArg_ParseTuple(item, "UUiO", &key, &name, &kind, &dflt)) return -1;
        if (kind < K_PHASE || kind > K_RAW || PyUnicode_GET_LENGTH(key) == 0) {
            PyErr_SetString(PyExc_ValueError, "a field's kind is unknown or its key empty");
            return -1;
        }
        FieldSpec *f = &(*specs)[i];
        f->key = PyUnicode_AsUTF8AndSize(key, &f->key_len);
        if (!f->key) return -1;
        f->name = name;
        f->kind = (enum kind)kind;
        f->dflt = dflt;
        if (kind == K_INT_STR && PyLong_CheckExact(dflt)) { /* integers without objects */
            int overflow;
            long long d = PyLong_AsLongLongAndOverflow(dflt, &overflow);
            if (d == -1 && PyErr_Occurred()) return -1;
            (*cols)[i].typed = !overflow;
            (*cols)[i].int_dflt = d;
        }
    }
    index->specs = *specs;
    index->n = *n;
    for (int k = 0; k < LEN_SLOTS; k++) index->first_of_len[k] = -1;
    for (size_t i = *n; i-- > 0;) { /* each length's chain in spec order */
        FieldSpec *f = &(*specs)[i];
        f->next_same_len = -1;
        if (f->key_len < LEN_SLOTS) {
            f->next_same_len = index->first_of_len[f->key_len];
            index->first_of_len[f->key_len] = (int)i;
        }
    }
    return 0;
}

/* The parser ready for the fields of both specs and ``rows`` rows: 0, else -1 with ps->error set
   (an exception) or, for too many rows, declined. */
static int parser_setup(Parser *ps, PyObject *event_spec, PyObject *args_spec, uint64_t seed, Py_ssize_t rows) {
    ps->seed = seed;
    if (read_spec(ps, event_spec, &ps->event_specs, &ps->event_cols, &ps->n_event, &ps->event_index) < 0 ||
        read_spec(ps, args_spec, &ps->args_specs, &ps->args_cols, &ps->n_args, &ps->args_index) < 0) {
        ps->error = 1;
        return -1;
    }
    if (cache_grow(ps) < 0 || reserve(ps, rows) < 0) {
        ps->error = ps->error || PyErr_Occurred() != NULL;
        return -1;
    }
    return 0;
}

static PyObject *decode_events(PyObject *self, PyObject *args) {
    PyObject *event_spec, *args_spec;
    unsigned long long seed;
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*OOK", &buf, &event_spec, &args_spec, &seed)) return NULL;
    Parser *ps = PyMem_Calloc(1, sizeof(Parser));
    if (!ps) {
        PyBuffer_Release(&buf);
        return PyErr_NoMemory();
    }
    ps->p = buf.buf;
    ps->end = (const char *)buf.buf + buf.len;
    PyObject *out = NULL; /* events: 100-300 B each */
    if (parser_setup(ps, event_spec, args_spec, seed, buf.len / 96 + 1024) == 0 && read_events(ps) == 0) {
        out = result(ps);
    }
    if (!out && !ps->error) out = Py_NewRef(Py_None); /* declined */
    parser_free(ps);
    PyMem_Free(ps);
    PyBuffer_Release(&buf); /* after the string table that points into it is freed */
    return out;
}

/* ---- the events array in pieces ---------------------------------------------------------- */

#define STREAM_CAPSULE "hta_lite._fastjson.stream"

typedef struct {
    Parser *ps;
    PyObject *specs; /* (event_spec, args_spec), kept alive: the FieldSpecs point into them */
    int state;       /* 0: before the first event, 1: after an event, 2: after a comma, 3: done */
    int busy;        /* a feed is reading (without the GIL): no second one */
} Stream;

static void stream_free(Stream *st) {
    if (st->ps) {
        parser_free(st->ps);
        PyMem_Free(st->ps);
    }
    Py_XDECREF(st->specs);
    PyMem_Free(st);
}

static void stream_capsule_free(PyObject *capsule) {
    Stream *st = PyCapsule_GetPointer(capsule, STREAM_CAPSULE);
    if (st) stream_free(st);
}

static PyObject *stream_open(PyObject *self, PyObject *args) {
    PyObject *event_spec, *args_spec;
    unsigned long long seed;
    Py_ssize_t rows;
    int after_comma = 0;
    if (!PyArg_ParseTuple(args, "OOKn|p", &event_spec, &args_spec, &seed, &rows, &after_comma)) return NULL;
    Stream *st = PyMem_Calloc(1, sizeof(Stream));
    if (!st) return PyErr_NoMemory();
    st->ps = PyMem_Calloc(1, sizeof(Parser));
    st->specs = PyTuple_Pack(2, event_spec, args_spec);
    Parser *ps = st->ps;
    if (!ps || !st->specs) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        stream_free(st);
        return NULL;
    }
    if (parser_setup(ps, event_spec, args_spec, seed, rows < 1024 ? 1024 : rows) < 0 || value_table_grow(ps) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "too many rows");
        stream_free(st);
        return NULL;
    }
    ps->deferred = 1; /* feeds read without the GIL */
    st->state = after_comma ? 2 : 0;
    PyObject *capsule = PyCapsule_New(st, STREAM_CAPSULE, stream_capsule_free);
    if (!capsule) stream_free(st);
    return capsule;
}

/* Undo what a partly read event put in row ``ps->rows`` (it is read again with more text); the
   value texts first met in it (ids from ``first_text``) are provisional until met again. */
static void forget_row(Parser *ps, Py_ssize_t first_text) {
    for (Py_ssize_t id = first_text; id < ps->n_vtexts; id++) ps->vtexts[id].provisional = 1;
    int32_t row = (int32_t)ps->rows;
    Column *sets[2] = {ps->event_cols, ps->args_cols};
    size_t counts[2] = {ps->n_event, ps->n_args};
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; i < counts[s]; i++) {
            Column *col = &sets[s][i];
            while (col->count && col->rows[col->count - 1] == row) drop_slot(col->vals[--col->count]);
        }
    }
    ps->ts[row] = ps->dur[row] = 0;
    ps->ts_valid[row] = ps->dur_valid[row] = 0;
}

/* The events in ``buf`` (absolute offset ``base`` in the text) read into the stream's columns,
   without the GIL; with ``limit`` >= 0, stopped at the first event that starts at or after
   that offset (STOPPED). Returns FED_MORE (the rest of the buffer is an event cut by its end,
   or nothing), FED_CLOSED (the closing ']' read) or FED_STOPPED; -1 declined or an error. */
enum { FED_MORE, FED_CLOSED, FED_STOPPED };

static int read_buffer(Stream *st, const char *start, Py_ssize_t len, int final, Py_ssize_t base, Py_ssize_t limit) {
    Parser *ps = st->ps;
    int status = FED_MORE;
    ps->p = start;
    ps->end = start + len;
    for (;;) {
        skip_ws(ps);
        if (ps->p == ps->end) break;
        int c = peek(ps);
        if (st->state == 1) {
            if (c == ',') {
                ps->p++;
                st->state = 2;
                continue;
            }
            if (c != ']') decline(ps);
            else {
                ps->p++;
                st->state = 3;
            }
            break;
        }
        if (st->state == 0 && c == ']') {
            ps->p++;
            st->state = 3;
            break;
        }
        if (st->state == 2 && limit >= 0 && base + (ps->p - start) >= limit) {
            status = FED_STOPPED;
            break;
        }
        if (ps->rows == ps->cap && reserve(ps, ps->cap * 2) < 0) break;
        const char *event_start = ps->p;
        Py_ssize_t first_text = ps->n_vtexts;
        if (read_event(ps) == 0) {
            ps->rows++;
            st->state = 1;
            continue;
        }
        if (!ps->error && !final) { /* cut by the end of the buffer, perhaps: wait for more */
            forget_row(ps, first_text);
            ps->decline = 0;
            ps->p = event_start;
        }
        break;
    }
    if (st->state == 3) status = FED_CLOSED;
    return ps->error || ps->decline ? -1 : status;
}

static PyObject *stream_feed(PyObject *self, PyObject *args) {
    PyObject *capsule;
    Py_buffer buf;
    int final;
    Py_ssize_t base = 0, limit = -1;
    if (!PyArg_ParseTuple(args, "Oy*p|nn", &capsule, &buf, &final, &base, &limit)) return NULL;
    Stream *st = PyCapsule_GetPointer(capsule, STREAM_CAPSULE);
    if (!st || st->busy) {
        if (st) PyErr_SetString(PyExc_RuntimeError, "the stream is being fed by another thread");
        PyBuffer_Release(&buf);
        return NULL;
    }
    Parser *ps = st->ps;
    if (st->state == 3 || ps->decline || ps->error) { /* done or declined: nothing more to read */
        PyBuffer_Release(&buf);
        ps->decline = 1;
        Py_RETURN_NONE;
    }
    int status;
    st->busy = 1;
    Py_BEGIN_ALLOW_THREADS /* deferred mode: no object is touched while reading */
    status = read_buffer(st, buf.buf, buf.len, final, base, limit);
    Py_END_ALLOW_THREADS
    st->busy = 0;
    Py_ssize_t consumed = ps->p - (const char *)buf.buf;
    PyBuffer_Release(&buf);
    ps->p = ps->end = NULL; /* nothing points into the buffer once it is released */
    if (ps->nomem) {
        ps->nomem = 0;
        return PyErr_NoMemory();
    }
    if (ps->error) return NULL;
    if (final && status == FED_MORE) decline(ps); /* the text ended inside the array */
    if (ps->decline) Py_RETURN_NONE;
    return Py_BuildValue("(ni)", consumed, status);
}

/* stream_join(first, second): the events ``second`` read (from where ``first`` stopped: its
   feed gave FED_STOPPED, and ``second`` was opened after_comma and read to the array's end)
   become the rows after ``first``'s; ``second`` is then empty. True, or False when either is
   not in that state (nothing changes). */
static PyObject *stream_join(PyObject *self, PyObject *args) {
    PyObject *first_capsule, *second_capsule;
    if (!PyArg_ParseTuple(args, "OO", &first_capsule, &second_capsule)) return NULL;
    Stream *first = PyCapsule_GetPointer(first_capsule, STREAM_CAPSULE);
    Stream *second = first ? PyCapsule_GetPointer(second_capsule, STREAM_CAPSULE) : NULL;
    if (!second) return NULL;
    if (first == second || first->busy || second->busy || first->state != 2 || second->state != 3 ||
        !first->ps || !second->ps || first->ps->decline || first->ps->error || second->ps->decline ||
        second->ps->error || first->ps->next || first->ps->n_event != second->ps->n_event ||
        first->ps->n_args != second->ps->n_args || first->ps->rows + second->ps->rows > INT32_MAX)
        Py_RETURN_FALSE;
    int same = PyObject_RichCompareBool(first->specs, second->specs, Py_EQ);
    if (same < 0) return NULL;
    if (!same) Py_RETURN_FALSE;
    first->ps->next = second->ps; /* freed with ``first`` */
    second->ps = NULL;
    second->state = 3;
    first->state = 3;
    Py_RETURN_TRUE;
}

static PyObject *stream_result(PyObject *self, PyObject *args) {
    PyObject *capsule;
    if (!PyArg_ParseTuple(args, "O", &capsule)) return NULL;
    Stream *st = PyCapsule_GetPointer(capsule, STREAM_CAPSULE);
    if (!st) return NULL;
    if (st->state != 3 || !st->ps || st->ps->decline || st->ps->error) {
        PyErr_SetString(PyExc_ValueError, "the events array was not read to its end");
        return NULL;
    }
    PyObject *out = result(st->ps);
    if (!out && !PyErr_Occurred()) out = Py_NewRef(Py_None); /* a value not of its field's kind */
    st->ps->decline = 1; /* the columns moved out: no second result */
    return out;
}

/* ---- rows of integers ------------------------------------------------------------------- */

static inline const unsigned char *skip_spaces(const unsigned char *p, const unsigned char *end) {
    while (p < end && IS_SPACE[*p]) p++;
    return p;
}

/* Rows of integers: a JSON array of arrays of `width` integers (as export_memory_timeline_raw
   writes), read a row at a time, from one buffer or from pieces of the text one after another
   (rows_on(r, piece) between them: a row cut by a piece's end is read again, whole, from the
   start of the next piece, which holds the cut part first). */
enum { ROWS_START, ROWS_FIRST, ROWS_NEXT, ROWS_CLOSED, ROWS_BAD };
typedef struct {
    const unsigned char *p, *end;
    int state; /* ROWS_START: before '['; FIRST: after it; NEXT: after a ','; CLOSED: after the
                  closing ']' (only spaces may follow); BAD: anything else met */
} RowReader;

static void rows_on(RowReader *r, const void *buf, Py_ssize_t len) {
    r->p = buf;
    r->end = r->p + len;
}

/* Before a row can be read (r->state not ROWS_NEXT): the array's opening, its closing or what
   follows that; 1 when a row follows (r->state ROWS_NEXT, r->p at it), else 0 (as rows_next). */
static int rows_head(RowReader *r) {
    const unsigned char *p = skip_spaces(r->p, r->end), *end = r->end;
    if (r->state == ROWS_START && p < end) {
        if (*p != '[') {
            r->state = ROWS_BAD;
            return 0;
        }
        r->state = ROWS_FIRST;
        p = skip_spaces(p + 1, end);
    }
    if (r->state == ROWS_FIRST && p < end) {
        r->state = *p == ']' ? ROWS_CLOSED : ROWS_NEXT;
        if (r->state == ROWS_CLOSED) p = skip_spaces(p + 1, end);
    }
    if (r->state == ROWS_CLOSED && p < end) r->state = ROWS_BAD;
    r->p = p;
    return r->state == ROWS_NEXT;
}

/* The digits at *at (at most 20, none at or past ``end``) as an unsigned value, *at moved past
   them; the caller takes the value with int_of once it knows the digits end there. */
static inline uint64_t read_digits(const unsigned char **at, const unsigned char *end) {
    const unsigned char *p = *at, *digits = p, *last = end - p > 20 ? p + 20 : end; /* 20: too many */
    uint64_t u = 0;
#if PY_LITTLE_ENDIAN
    uint64_t w;
    while (end - p >= 8 && p - digits <= 11 && (memcpy(&w, p, 8), eight_digits(w))) {
        u = u * 100000000 + eight_digits_value(w); /* at most 19 digits so far */
        p += 8;
    }
#endif
    while (p < last && (unsigned)(*p - '0') < 10) u = u * 10 + (*p++ - '0');
    *at = p;
    return u;
}

/* The integer of the digits [digits, digits + n) read as ``u``, negated when ``negative``, into
   *v: 1; 0 when it is not one (no digit, more than 19, a leading zero, outside int64). */
static inline int int_of(uint64_t u, const unsigned char *digits, Py_ssize_t n, int negative, int64_t *v) {
    if (n == 0 || n > 19 || (n > 1 && *digits == '0')) return 0;
    if (u > (uint64_t)INT64_MAX + (uint64_t)negative) return 0;
    *v = negative ? (int64_t)(0 - u) : (int64_t)u;
    return 1;
}

/* The common layout, read with fewer checks: a row "[n, n, ...]" (one space after each comma)
   followed by ", " or "]", with at least PLAIN_ROOM(width) bytes before ``end`` (no bound is
   checked but the digits'). 1: the row into v, *at past the separator (and the space after a comma), *closed
   whether it was the array's "]"; 0: anything else, for rows_next's general reading. */
#define PLAIN_ROOM(width) (32 * (width) + 8) /* a number takes at most 23 bytes, reads 24 */
static inline int row_plain(const unsigned char **at, const unsigned char *end, Py_ssize_t width,
                            int64_t *v, int *closed) {
    const unsigned char *p = *at;
    if (*p++ != '[') return 0;
    for (Py_ssize_t i = 0; i < width; i++) {
        int negative = *p == '-';
        p += negative;
        if ((unsigned)(*p - '0') < 10 && (unsigned)(p[1] - '0') >= 10) { /* one digit */
            v[i] = negative ? -(int64_t)(*p - '0') : (int64_t)(*p - '0');
            p++;
        } else {
            const unsigned char *digits = p;
            uint64_t u = read_digits(&p, end);
            if (!int_of(u, digits, p - digits, negative, &v[i])) return 0;
        }
        if (i + 1 < width) {
            if (p[0] != ',' || p[1] != ' ') return 0;
            p += 2;
        } else if (*p++ != ']') {
            return 0;
        }
    }
    if (p[0] == ',' && p[1] == ' ') {
        *at = p + 2;
        *closed = 0;
        return 1;
    }
    if (*p != ']') return 0;
    *at = p + 1;
    *closed = 1;
    return 1;
}

/* The next row into v: 1; or 0: no row, with r->state CLOSED (spaces after the array so far) or
   BAD, or the text ends first (r->p at what is left: the start of a cut row, or the end). An
   integer: sign, 1 to 19 digits, no leading zero, within int64. */
static inline int rows_next(RowReader *r, Py_ssize_t width, int64_t *v) {
    if (r->state != ROWS_NEXT && !rows_head(r)) return 0;
    int closed;
    if (r->end - r->p >= PLAIN_ROOM(width) && row_plain(&r->p, r->end, width, v, &closed)) {
        if (closed) r->state = ROWS_CLOSED;
        return 1;
    }
    const unsigned char *p = skip_spaces(r->p, r->end), *end = r->end;
    if (p == end) {
        r->p = p;
        return 0;
    }
    const unsigned char *row = p;
    if (*p++ != '[') goto bad;
    for (Py_ssize_t i = 0; i < width; i++) {
        p = skip_spaces(p, end);
        int negative = p < end && *p == '-';
        p += negative;
        const unsigned char *digits = p;
        uint64_t u = read_digits(&p, end);
        Py_ssize_t n = p - digits;
        p = skip_spaces(p, end);
        if (p == end) goto cut; /* more digits may follow */
        if (!int_of(u, digits, n, negative, &v[i])) goto bad;
        if (*p != (i + 1 < width ? ',' : ']')) goto bad; /* also ends 1.5, 1e3, and 1 2 */
        p++;
    }
    p = skip_spaces(p, end);
    if (p == end) goto cut; /* the separator decides whether the row is the last */
    if (*p != ']' && *p != ',') goto bad;
    r->state = *p == ']' ? ROWS_CLOSED : ROWS_NEXT;
    r->p = p + 1;
    return 1;
cut:
    r->p = row;
    return 0;
bad:
    r->state = ROWS_BAD;
    return 0;
}

/* int_rows(buffer, width): the rows as the bytes of an int64 array, row after row; None for
   anything else (the caller's msgspec path then names the problem). */
static PyObject *int_rows(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "y*n", &buf, &width)) return NULL;
    if (width < 1 || width > 64) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "width must be 1 to 64");
        return NULL;
    }
    /* each row takes at least 2 * width + 2 bytes: '[', digits, commas, ']' and a separator */
    Py_ssize_t cap = buf.len / (2 * width + 2) + 1, rows = 0;
    PyObject *out = PyBytes_FromStringAndSize(NULL, cap * width * (Py_ssize_t)sizeof(int64_t));
    if (!out) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    int64_t *v = (int64_t *)PyBytes_AS_STRING(out);
    RowReader r = {.state = ROWS_START};
    rows_on(&r, buf.buf, buf.len);
    while (rows < cap && rows_next(&r, width, v + rows * width)) rows++;
    int ok = r.state == ROWS_CLOSED && r.p == r.end;
    PyBuffer_Release(&buf);
    if (!ok) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    if (_PyBytes_Resize(&out, rows * width * (Py_ssize_t)sizeof(int64_t)) < 0) return NULL;
    return out;
}

/* category_sums(source, categories, size_hint=0, piece_bytes=65536): the rows of a raw memory
   timeline (ts, action, bytes, category; the text int_rows(text, 4) reads) summed as HTA's
   MemoryAnalysis sums them, with no array of the rows: one output row per run of entries with
   one ts, in file order: the run's ts (a ts before the first real one, -1 for memory that
   existed before profiling, placed at the first real ts; 0 when there is none) and the bytes
   held per category after the run, as int64 (runs, 1 + categories) in a bytearray; None when
   the text is anything int_rows declines or a category is out of range. ``source``: the text
   (a buffer), or a reader of it (``readinto``, e.g. a gzip reader), read ``piece_bytes`` at a
   time into one buffer, so that the whole text is never in memory (``size_hint``: its length,
   as far as known, for the output's first room). */
typedef struct {
    PyObject *out;         /* bytearray of the lines so far */
    Py_ssize_t cap, runs, k, line_bytes;
    uint64_t held[64];     /* unsigned: a sum wraps as numpy's does, never undefined */
    int64_t first, ts;     /* the first real ts; the current run's */
    int any, bad;          /* an entry was read; a category was out of range */
} Sums;

/* Output line ``s->runs``: the run's ts and the bytes held per category (the bytearray grown
   when full); -1 with an exception set when memory runs out. */
static int emit_run(Sums *s) {
    if (s->runs == s->cap) {
        s->cap *= 2;
        if (PyByteArray_Resize(s->out, s->cap * s->line_bytes) < 0) return -1;
    }
    int64_t *line = (int64_t *)(PyByteArray_AS_STRING(s->out) + s->runs++ * s->line_bytes);
    line[0] = s->ts;
    for (Py_ssize_t c = 0; c < s->k; c++) line[1 + c] = (int64_t)s->held[c];
    return 0;
}

/* The rows the reader gives from its current buffer, summed: -1 on an exception, else 0. */
static int sum_rows(Sums *s, RowReader *r) {
    int64_t row[4];
    while (rows_next(r, 4, row)) {
        if ((s->bad = row[3] < 0 || row[3] >= s->k)) return 0;
        if (s->any && row[0] != s->ts && emit_run(s) < 0) return -1;
        s->any = 1;
        s->ts = row[0];
        if (s->ts >= 0 && s->ts < s->first) s->first = s->ts;
        s->held[row[3]] += (uint64_t)row[2];
    }
    return 0;
}

/* Up to ``len`` bytes of the reader's text into ``buf``: the count (0 at its end), -1 on an
   exception. The view handed to the reader is released after the call, so that a reader that
   kept it cannot write into ``buf`` later (nor hold an export of it: BufferError). */
static Py_ssize_t read_into(PyObject *reader, char *buf, Py_ssize_t len) {
    PyObject *view = PyMemoryView_FromMemory(buf, len, PyBUF_WRITE);
    if (!view) return -1;
    PyObject *got = PyObject_CallMethod(reader, "readinto", "O", view), *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace); /* the reader's exception, kept over the release */
    PyObject *released = PyObject_CallMethod(view, "release", NULL);
    Py_DECREF(view);
    if (!released) Py_CLEAR(got);
    if (type) { /* the reader's exception, not the release's */
        PyErr_Clear();
        PyErr_Restore(type, value, trace);
    }
    Py_XDECREF(released);
    if (!got) return -1;
    Py_ssize_t n = PyLong_Check(got) ? PyLong_AsSsize_t(got) : -1;
    Py_DECREF(got);
    if (n >= 0 && n <= len) return n;
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "readinto gave no byte count");
    return -1;
}

/* The reader's text summed a piece at a time: 1 when read to its end, 0 declined, -1 error. */
static int sum_pieces(Sums *s, RowReader *r, PyObject *reader, Py_ssize_t piece) {
    char *buf = PyMem_Malloc(piece);
    if (!buf) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t filled = 0, got = 1;
    int status = -1;
    while (got) {
        while (filled < piece && (got = read_into(reader, buf + filled, piece - filled)) > 0) filled += got;
        if (got < 0) goto done;
        rows_on(r, buf, filled);
        if (sum_rows(s, r) < 0) goto done;
        if (s->bad || r->state == ROWS_BAD) break;
        filled = r->end - r->p; /* a cut row: first in the next piece */
        memmove(buf, r->p, filled);
        if (filled == piece) { /* a row longer than the piece: a larger piece */
            char *larger = PyMem_Realloc(buf, piece * 2);
            if (!larger) {
                PyErr_NoMemory();
                goto done;
            }
            buf = larger;
            piece *= 2;
        }
    }
    status = !got; /* read to its end (a cut row left then: not ROWS_CLOSED) */
done:
    PyMem_Free(buf);
    return status;
}

static PyObject *category_sums(PyObject *self, PyObject *args) {
    PyObject *source;
    Py_ssize_t size_hint = 0, piece = 65536;
    Sums s = {.first = INT64_MAX};
    if (!PyArg_ParseTuple(args, "On|nn", &source, &s.k, &size_hint, &piece)) return NULL;
    if (s.k < 1 || s.k > 64 || piece < 1) {
        PyErr_SetString(PyExc_ValueError, "1 to 64 categories, pieces of 1 byte or more");
        return NULL;
    }
    Py_buffer buf = {0};
    int whole = PyObject_CheckBuffer(source);
    if (whole && PyObject_GetBuffer(source, &buf, PyBUF_SIMPLE) < 0) return NULL;
    /* room for a run per 32 bytes of text (an entry takes about 36), doubled when full */
    s.line_bytes = (1 + s.k) * (Py_ssize_t)sizeof(int64_t);
    s.cap = (whole ? buf.len : size_hint > 0 ? size_hint : 0) / 32 + 16;
    s.out = PyByteArray_FromStringAndSize(NULL, s.cap * s.line_bytes); /* a bytearray: writable */
    RowReader r = {.state = ROWS_START};
    int status = -1;
    if (s.out && whole) {
        rows_on(&r, buf.buf, buf.len);
        status = sum_rows(&s, &r) < 0 ? -1 : r.p == r.end;
    } else if (s.out) {
        status = sum_pieces(&s, &r, source, piece);
    }
    if (whole) PyBuffer_Release(&buf);
    if (status > 0 && (s.bad || r.state != ROWS_CLOSED)) status = 0;
    if (status > 0 && s.any && emit_run(&s) < 0) status = -1;
    if (status <= 0) {
        Py_XDECREF(s.out);
        if (status < 0) return NULL;
        Py_RETURN_NONE;
    }
    if (s.first == INT64_MAX) s.first = 0;
    Py_ssize_t width = 1 + s.k;
    int64_t *o = (int64_t *)PyByteArray_AS_STRING(s.out);
    for (Py_ssize_t i = 0; i < s.runs; i++) /* only a ts below 0 is below the first real one */
        if (o[i * width] < s.first) o[i * width] = s.first;
    if (PyByteArray_Resize(s.out, s.runs * s.line_bytes) < 0) Py_CLEAR(s.out);
    return s.out;
}

static PyMethodDef methods[] = {
    {"decode_events", decode_events, METH_VARARGS,
     "decode_events(buffer, event_spec, args_spec, seed) -> dict | None: the events array as columns"},
    {"stream_open", stream_open, METH_VARARGS,
     "stream_open(event_spec, args_spec, seed, rows, after_comma=False) -> stream: the events array read in pieces"},
    {"stream_feed", stream_feed, METH_VARARGS,
     "stream_feed(stream, buffer, final, base=0, limit=-1) -> (consumed, status) | None: the complete events of buffer (status 0: more text wanted, 1: the array closed, 2: stopped at limit)"},
    {"stream_join", stream_join, METH_VARARGS,
     "stream_join(first, second) -> bool: second's events after first's (first stopped at a limit, second read from there)"},
    {"stream_result", stream_result, METH_VARARGS,
     "stream_result(stream) -> dict | None: the columns, as decode_events gives them (None: declined)"},
    {"int_rows", int_rows, METH_VARARGS,
     "int_rows(buffer, width) -> bytes | None: [[int, ...], ...] as int64 values, row after row"},
    {"category_sums", category_sums, METH_VARARGS,
     "category_sums(source, categories, size_hint=0, piece_bytes=65536) -> bytearray | None: a raw memory timeline's bytes held per category after each ts (source: the text, or a reader of it)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastjson", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastjson(void) {
    init_tables();
    return PyModule_Create(&module);
}
