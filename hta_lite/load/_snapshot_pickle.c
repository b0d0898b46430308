/* A reader of CUDA memory snapshot pickles that writes the allocator's trace as columns
   (optional accelerator of hta_lite.load.snapshot).

   read(buffer) -> (snapshot, columns) or None

   It runs the pickle opcodes Python's pickler writes for plain data (protocols 2-5: dicts,
   lists, tuples, strings, bytes, integers of any size, floats, booleans, None, the memo). Every
   other opcode -- a global, a call, a persistent id, text protocols -- and anything malformed
   makes it return None without going on: the caller then reads the file with its restricted
   unpickler, which decides (and names the global). Nothing in the file is ever looked up or
   called here.

   A dict holding the key "action" is a trace entry: it becomes a row of the columns instead
   of a dict, and None stands for it in the list that holds it (a device's trace). Its
   "addr", "size", "stream", "time_us" (required) and "device_free" (optional, -1 without it)
   must be integers that fit int64, and its "frames" a list (or None / absent); its other
   keys are not kept. Each row's frames are numbered by content (the identity of each frame
   object, so frames shared through the memo make one stack): equal stacks share one list.

   columns: {"rows": n, "action": int32 codes (bytearray), "actions": [names by code],
             "addr", "size", "stream", "time_us", "device_free": int64 (bytearray),
             "stack": int32 (-1: no frames), "stacks": [one list of frames per stack],
             "owner": int64 index in "owners" of the list holding each row, "position": int64
             its place there, "owners": [the lists rows were put in]}

   It takes exactly what the restricted unpickler (plain_pickle.py) takes, or less: integers of
   int64 (LONG1 of 8 bytes at most, no LONG4), memo slots in order, a FRAME no longer than the
   rest of the file. Anything that would not be the same as the plain unpickler's data -- an
   entry met twice (through the memo) or not held by a list, a field of another type, a dict
   the memo refers to before it is complete, an APPEND to a list already read as an entry's
   frames -- also returns None. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030B0000
#define PyFloat_Unpack8(p, le) _PyFloat_Unpack8((const unsigned char *)(p), (le))
#endif

enum { K_OBJ, K_INT, K_LAZY, K_ROW };

typedef struct {
    int kind;
    int64_t i;      /* K_INT: the value; K_ROW: the row */
    PyObject *o;    /* K_OBJ: a strong reference */
    Py_ssize_t memo; /* the memo slot this value was stored in, -1 if none */
} Value;

typedef struct {
    PyObject *array; /* bytearray */
    Py_ssize_t used;  /* bytes */
} Column;

typedef struct {
    const unsigned char *p, *end;
    const unsigned char *frame_end; /* the end of the FRAME being read, NULL outside frames */
    Value *stack;
    Py_ssize_t depth, stack_cap;
    Py_ssize_t *marks;
    Py_ssize_t n_marks, marks_cap;
    Value *memo;
    Py_ssize_t memo_cap, memo_len;
    /* the trace rows */
    int64_t rows;
    Column action, addr, size, stream, time_us, device_free, stack_id, owner, position;
    unsigned char *materialized; /* per row: times put in a list */
    int64_t materialized_cap;
    PyObject *action_codes; /* {name: code} */
    PyObject *actions;      /* [name] */
    PyObject *stacks;       /* [list of frames] */
    /* stacks by content: open addressing over (hash, stack) */
    uint64_t *stack_hash;
    int64_t *stack_slot;
    int64_t stack_table_cap, n_stacks;
    PyObject *k_action, *k_addr, *k_size, *k_stream, *k_time_us, *k_device_free, *k_frames;
    /* key objects met (the memo shares them) and their field: no string compare per entry */
    PyObject *seen_key[32];
    int seen_field[32], n_seen;
    /* every list whose items became a stack (an entry's frames): a later APPEND to one would
       change that entry's frames after its row was written, so it declines */
    uintptr_t *frozen;
    int64_t frozen_cap, n_frozen;
    PyObject *frozen_lists; /* held: no other list takes the address of one */
    /* the lists rows were appended to, held (so no other list can take the address of one)
       and named by their index in the owner column */
    PyObject *owners;
    PyObject *last_owner;
    /* frames lists met, by identity: their stack (a list the memo shares is hashed once) */
    PyObject *known_list[1024];
    int64_t known_stack[1024];
} Reader;

enum { F_ADDR, F_SIZE, F_STREAM, F_TIME_US, F_DEVICE_FREE, F_ACTION, F_FRAMES, F_OTHER };

/* The field a key names (F_OTHER for the keys not kept), -1 for a key that is not text. */
static int field_of(Reader *r, Value *key) {
    if (key->kind != K_OBJ) return -1;
    for (int k = 0; k < r->n_seen; k++)
        if (r->seen_key[k] == key->o) return r->seen_field[k];
    if (!PyUnicode_CheckExact(key->o)) return -1;
    PyObject *names[] = {r->k_addr, r->k_size, r->k_stream, r->k_time_us, r->k_device_free,
                         r->k_action, r->k_frames};
    int field = F_OTHER;
    for (int f = 0; f < F_OTHER; f++)
        if (PyUnicode_Compare(key->o, names[f]) == 0) field = f;
    if (r->n_seen < 32) {
        Py_INCREF(key->o);
        r->seen_key[r->n_seen] = key->o;
        r->seen_field[r->n_seen++] = field;
    }
    return field;
}

static int column_put(Column *c, const void *value, Py_ssize_t width) {
    Py_ssize_t have = PyByteArray_GET_SIZE(c->array);
    if (c->used + width > have) {
        Py_ssize_t want = have < 4096 ? 4096 : have * 2;
        if (PyByteArray_Resize(c->array, want) < 0) return -1;
    }
    memcpy(PyByteArray_AS_STRING(c->array) + c->used, value, width);
    c->used += width;
    return 0;
}

static uint64_t mix_ptr(uintptr_t p) {
    uint64_t h = (uint64_t)p * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 31);
}

/* Record that ``list`` is an entry's frames (0, or -1: out of memory). */
static int freeze(Reader *r, PyObject *list) {
    if (2 * (r->n_frozen + 1) > r->frozen_cap) {
        int64_t cap = r->frozen_cap ? r->frozen_cap * 2 : 1024;
        uintptr_t *grown = PyMem_Calloc(cap, sizeof(uintptr_t));
        if (!grown) return -1;
        for (int64_t k = 0; k < r->frozen_cap; k++) {
            uintptr_t p = r->frozen[k];
            if (!p) continue;
            int64_t at = (int64_t)(mix_ptr(p) & (uint64_t)(cap - 1));
            while (grown[at]) at = (at + 1) & (cap - 1);
            grown[at] = p;
        }
        PyMem_Free(r->frozen);
        r->frozen = grown;
        r->frozen_cap = cap;
    }
    uintptr_t p = (uintptr_t)list;
    int64_t at = (int64_t)(mix_ptr(p) & (uint64_t)(r->frozen_cap - 1));
    while (r->frozen[at]) {
        if (r->frozen[at] == p) return 0;
        at = (at + 1) & (r->frozen_cap - 1);
    }
    if (PyList_Append(r->frozen_lists, list) < 0) return -1;
    r->frozen[at] = p;
    r->n_frozen++;
    return 0;
}

static int is_frozen(Reader *r, PyObject *list) {
    if (!r->frozen_cap) return 0;
    uintptr_t p = (uintptr_t)list;
    int64_t at = (int64_t)(mix_ptr(p) & (uint64_t)(r->frozen_cap - 1));
    while (r->frozen[at]) {
        if (r->frozen[at] == p) return 1;
        at = (at + 1) & (r->frozen_cap - 1);
    }
    return 0;
}

static void value_clear(Value *v) {
    if (v->kind == K_OBJ) Py_CLEAR(v->o);
    v->kind = K_INT;
    v->i = 0;
    v->memo = -1;
}

static int push(Reader *r, Value v) {
    if (r->depth == r->stack_cap) {
        Py_ssize_t cap = r->stack_cap ? r->stack_cap * 2 : 256;
        Value *grown = PyMem_Realloc(r->stack, cap * sizeof(Value));
        if (!grown) return -1;
        r->stack = grown;
        r->stack_cap = cap;
    }
    r->stack[r->depth++] = v;
    return 0;
}

static int push_obj(Reader *r, PyObject *o) { /* steals o */
    if (!o) return -1;
    Value v = {K_OBJ, 0, o, -1};
    if (push(r, v) < 0) {
        Py_DECREF(o);
        return -1;
    }
    return 0;
}

static int push_int(Reader *r, int64_t i) {
    Value v = {K_INT, i, NULL, -1};
    return push(r, v);
}

/* A new reference to v as a Python object (a lazy dict becomes an empty dict). */
static PyObject *to_obj(Reader *r, Value *v) {
    switch (v->kind) {
    case K_OBJ:
        Py_INCREF(v->o);
        return v->o;
    case K_INT:
        return PyLong_FromLongLong(v->i);
    case K_LAZY: {
        PyObject *d = PyDict_New();
        if (!d) return NULL;
        if (v->memo >= 0) {
            Value *m = &r->memo[v->memo];
            if (m->kind == K_LAZY) {
                m->kind = K_OBJ;
                Py_INCREF(d);
                m->o = d;
            }
        }
        return d;
    }
    default: /* a row outside a list */
        return NULL;
    }
}

/* Where the values since the last MARK start: the unpickler keeps them as a stack of their own,
   so no opcode reaches a value below it (a SETITEM, APPEND, TUPLE, DUP, memo put or STOP that
   would is an error there, and declines here). */
static Py_ssize_t base(Reader *r) { return r->n_marks ? r->marks[r->n_marks - 1] : 0; }

static int memo_put(Reader *r, Py_ssize_t slot) {
    if (r->depth <= base(r) || slot < 0 || slot > r->memo_len) return -1; /* a pickler numbers in order */
    if (slot >= r->memo_cap) {
        Py_ssize_t cap = r->memo_cap ? r->memo_cap : 1024;
        while (cap <= slot) cap *= 2;
        Value *grown = PyMem_Realloc(r->memo, cap * sizeof(Value));
        if (!grown) return -1;
        for (Py_ssize_t k = r->memo_cap; k < cap; k++) grown[k].kind = -1; /* unset */
        r->memo = grown;
        r->memo_cap = cap;
    }
    Value *top = &r->stack[r->depth - 1];
    Value *m = &r->memo[slot];
    if (m->kind == -1)
        r->memo_len++;
    else
        value_clear(m);
    *m = *top;
    if (m->kind == K_OBJ) Py_INCREF(m->o);
    m->memo = slot;
    top->memo = slot;
    return 0;
}

static int memo_get(Reader *r, Py_ssize_t slot) {
    if (slot < 0 || slot >= r->memo_cap) return -1;
    Value v = r->memo[slot];
    if (v.kind == -1 || v.kind == K_LAZY || v.kind == K_ROW) return -1; /* see the header */
    if (v.kind == K_OBJ) Py_INCREF(v.o);
    return push(r, v);
}

static Py_ssize_t pop_mark(Reader *r) {
    if (r->n_marks == 0) return -1;
    Py_ssize_t k = r->marks[--r->n_marks];
    return k <= r->depth ? k : -1;
}

static void pop_to(Reader *r, Py_ssize_t k) {
    while (r->depth > k) value_clear(&r->stack[--r->depth]);
}

static uint64_t hash_items(PyObject **items, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)n;
    for (Py_ssize_t k = 0; k < n; k++) {
        h ^= (uint64_t)(uintptr_t)items[k];
        h *= 1099511628211ULL;
        h ^= h >> 29;
    }
    return h;
}

static int stack_table_grow(Reader *r) {
    int64_t cap = r->stack_table_cap ? r->stack_table_cap * 2 : 1024;
    uint64_t *hash = PyMem_Calloc(cap, sizeof(uint64_t));
    int64_t *slot = PyMem_Malloc(cap * sizeof(int64_t));
    if (!hash || !slot) {
        PyMem_Free(hash);
        PyMem_Free(slot);
        return -1;
    }
    for (int64_t k = 0; k < cap; k++) slot[k] = -1;
    for (int64_t k = 0; k < r->stack_table_cap; k++) {
        if (r->stack_slot[k] < 0) continue;
        int64_t at = (int64_t)(r->stack_hash[k] & (uint64_t)(cap - 1));
        while (slot[at] >= 0) at = (at + 1) & (cap - 1);
        hash[at] = r->stack_hash[k];
        slot[at] = r->stack_slot[k];
    }
    PyMem_Free(r->stack_hash);
    PyMem_Free(r->stack_slot);
    r->stack_hash = hash;
    r->stack_slot = slot;
    r->stack_table_cap = cap;
    return 0;
}

/* The stack number of frames items[:n] (``list``: a list holding them, or NULL to make one):
   equal stacks (item by item identity) share one. -2: out of memory. */
static int64_t stack_of_items(Reader *r, PyObject **items, Py_ssize_t n, PyObject *list) {
    uint64_t h = hash_items(items, n);
    if (2 * (r->n_stacks + 1) > r->stack_table_cap && stack_table_grow(r) < 0) return -2;
    int64_t at = (int64_t)(h & (uint64_t)(r->stack_table_cap - 1));
    while (r->stack_slot[at] >= 0) {
        if (r->stack_hash[at] == h) {
            PyObject *known = PyList_GET_ITEM(r->stacks, r->stack_slot[at]);
            Py_ssize_t m = PyList_GET_SIZE(known);
            if (m == n && (n == 0 || memcmp(((PyListObject *)known)->ob_item, items,
                                            n * sizeof(PyObject *)) == 0))
                return r->stack_slot[at];
        }
        at = (at + 1) & (r->stack_table_cap - 1);
    }
    if (list) {
        Py_INCREF(list);
    } else {
        if (!(list = PyList_New(n))) return -2;
        for (Py_ssize_t k = 0; k < n; k++) {
            Py_INCREF(items[k]);
            PyList_SET_ITEM(list, k, items[k]);
        }
    }
    int bad = PyList_Append(r->stacks, list) < 0 || freeze(r, list) < 0;
    Py_DECREF(list);
    if (bad) return -2;
    r->stack_hash[at] = h;
    r->stack_slot[at] = r->n_stacks;
    return r->n_stacks++;
}

static int64_t stack_of(Reader *r, PyObject *frames) {
    Py_ssize_t n = PyList_GET_SIZE(frames);
    if (freeze(r, frames) < 0) return -2;
    size_t at = ((uintptr_t)frames >> 4) & 1023;
    int64_t known = r->known_stack[at];
    if (r->known_list[at] == frames &&
        PyList_GET_SIZE(PyList_GET_ITEM(r->stacks, known)) == n) /* a list only grows */
        return known;
    int64_t s = stack_of_items(r, ((PyListObject *)frames)->ob_item, n, frames);
    if (s >= 0) { /* held here, so the address names this list while it is cached */
        Py_INCREF(frames);
        Py_XSETREF(r->known_list[at], frames);
        r->known_stack[at] = s;
    }
    return s;
}

/* The code of an action name (a new one gets the next). -1: give up. */
static int32_t action_code(Reader *r, PyObject *name) {
    PyObject *code = PyDict_GetItemWithError(r->action_codes, name);
    if (code) return (int32_t)PyLong_AsLong(code);
    if (PyErr_Occurred()) return -1;
    Py_ssize_t next = PyList_GET_SIZE(r->actions);
    code = PyLong_FromSsize_t(next);
    int bad = !code || PyDict_SetItem(r->action_codes, name, code) < 0 ||
              PyList_Append(r->actions, name) < 0;
    Py_XDECREF(code);
    return bad ? -1 : (int32_t)next;
}

static int put_row(Reader *r, int32_t action, const int64_t *ints, int32_t stack) {
    if (r->rows == r->materialized_cap) {
        int64_t cap = r->materialized_cap ? r->materialized_cap * 2 : 4096;
        unsigned char *grown = PyMem_Realloc(r->materialized, cap);
        if (!grown) return -1;
        memset(grown + r->materialized_cap, 0, cap - r->materialized_cap);
        r->materialized = grown;
        r->materialized_cap = cap;
    }
    if (column_put(&r->action, &action, 4) < 0 || column_put(&r->addr, &ints[0], 8) < 0 ||
        column_put(&r->size, &ints[1], 8) < 0 || column_put(&r->stream, &ints[2], 8) < 0 ||
        column_put(&r->time_us, &ints[3], 8) < 0 || column_put(&r->device_free, &ints[4], 8) < 0 ||
        column_put(&r->stack_id, &stack, 4) < 0)
        return -1;
    return 0;
}

/* The items stack[k:] (key, value pairs) of a dict with "action": one row. 0, or -1: give up. */
static int entry_row(Reader *r, Py_ssize_t k) {
    int64_t ints[5] = {0, 0, 0, 0, -1}; /* addr, size, stream, time_us, device_free */
    int seen[5] = {0, 0, 0, 0, 1};
    int32_t action = -1, stack = -1;
    for (Py_ssize_t j = k; j + 1 < r->depth; j += 2) {
        Value *value = &r->stack[j + 1];
        int field = field_of(r, &r->stack[j]);
        if (field < 0) return -1;
        if (field == F_ACTION) {
            if (value->kind != K_OBJ || !PyUnicode_CheckExact(value->o)) return -1;
            if ((action = action_code(r, value->o)) < 0) return -1;
        } else if (field == F_FRAMES) {
            if (value->kind != K_OBJ) return -1;
            if (value->o == Py_None) {
                stack = -1;
                continue;
            }
            if (PyList_CheckExact(value->o) && !PyList_GET_SIZE(value->o)) {
                if (freeze(r, value->o) < 0) return -1; /* filled later: another stack */
                stack = -1;
                continue;
            }
            if (!PyList_CheckExact(value->o)) return -1;
            int64_t s = stack_of(r, value->o);
            if (s < 0) return -1;
            stack = (int32_t)s;
            /* the memo keeps the canonical list, so a stack is held once */
            PyObject *canonical = PyList_GET_ITEM(r->stacks, s);
            if (value->memo >= 0 && r->memo[value->memo].kind == K_OBJ &&
                r->memo[value->memo].o == value->o && canonical != value->o) {
                Py_INCREF(canonical);
                Py_SETREF(r->memo[value->memo].o, canonical);
            }
        } else if (field < F_ACTION) {
            if (value->kind != K_INT) return -1;
            ints[field] = value->i;
            seen[field] = 1;
        }
    }
    if (action < 0 || !seen[0] || !seen[1] || !seen[2] || !seen[3]) return -1;
    return put_row(r, action, ints, stack);
}

static int setitems(Reader *r, Py_ssize_t k) {
    if (k < 1 || k - 1 < base(r) || ((r->depth - k) & 1)) return -1;
    Value *target = &r->stack[k - 1];
    if (target->kind == K_LAZY) {
        int is_entry = 0;
        for (Py_ssize_t j = k; j < r->depth; j += 2)
            if (field_of(r, &r->stack[j]) == F_ACTION) is_entry = 1;
        if (is_entry) {
            if (entry_row(r, k) < 0) return -1;
            target->kind = K_ROW;
            target->i = r->rows;
            if (target->memo >= 0) {
                r->memo[target->memo].kind = K_ROW;
                r->memo[target->memo].i = r->rows;
            }
            r->rows++;
            pop_to(r, k);
            return 0;
        }
        PyObject *d = to_obj(r, target);
        if (!d) return -1;
        target->kind = K_OBJ;
        target->o = d;
    }
    if (target->kind != K_OBJ || !PyDict_CheckExact(target->o)) return -1;
    for (Py_ssize_t j = k; j < r->depth; j += 2) {
        PyObject *key = to_obj(r, &r->stack[j]);
        PyObject *value = key ? to_obj(r, &r->stack[j + 1]) : NULL;
        int bad = !value || PyDict_SetItem(target->o, key, value) < 0;
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (bad) return -1;
    }
    pop_to(r, k);
    return 0;
}

static int appends(Reader *r, Py_ssize_t k) {
    if (k < 1 || k - 1 < base(r)) return -1;
    Value *target = &r->stack[k - 1];
    if (target->kind != K_OBJ || !PyList_CheckExact(target->o)) return -1;
    if (is_frozen(r, target->o)) return -1; /* an entry's frames, changed after its row */
    for (Py_ssize_t j = k; j < r->depth; j++) {
        Value *v = &r->stack[j];
        PyObject *item;
        if (v->kind == K_ROW) {
            if (r->materialized[v->i]++) return -1; /* the same entry twice */
            if (target->o != r->last_owner) { /* held: its address names no other list */
                if (PyList_Append(r->owners, target->o) < 0) return -1;
                r->last_owner = target->o;
            }
            int64_t owner = PyList_GET_SIZE(r->owners) - 1;
            int64_t position = PyList_GET_SIZE(target->o);
            if (column_put(&r->owner, &owner, 8) < 0 || column_put(&r->position, &position, 8) < 0)
                return -1;
            /* rows are put in lists in row order (checked): owner/position are per row */
            if (r->owner.used / 8 != v->i + 1) return -1;
            Py_INCREF(Py_None);
            item = Py_None;
        } else {
            item = to_obj(r, v);
        }
        if (!item) return -1;
        int bad = PyList_Append(target->o, item) < 0;
        Py_DECREF(item);
        if (bad) return -1;
    }
    pop_to(r, k);
    return 0;
}

static PyObject *tuple_of(Reader *r, Py_ssize_t k) {
    if (k < base(r)) return NULL;
    PyObject *t = PyTuple_New(r->depth - k);
    if (!t) return NULL;
    for (Py_ssize_t j = k; j < r->depth; j++) {
        PyObject *item = to_obj(r, &r->stack[j]);
        if (!item) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, j - k, item);
    }
    pop_to(r, k);
    return t;
}

static int need(Reader *r, Py_ssize_t n) { return r->end - r->p >= n; }

static uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; k--) v = (v << 8) | p[k];
    return v;
}

static int read_long(Reader *r, Py_ssize_t n) { /* 0 <= n <= 8: an int64 */
    if (n < 0 || n > 8 || !need(r, n)) return -1;
    const unsigned char *b = r->p;
    r->p += n;
    if (n == 0) return push_int(r, 0);
    uint64_t u = le(b, (int)n);
    if (n < 8 && (b[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n); /* sign */
    return push_int(r, (int64_t)u);
}

static int read_text(Reader *r, Py_ssize_t n, int unicode) {
    if (n < 0 || !need(r, n)) return -1;
    const char *s = (const char *)r->p;
    r->p += n;
    return push_obj(r, unicode ? PyUnicode_DecodeUTF8(s, n, "surrogatepass")
                               : PyBytes_FromStringAndSize(s, n));
}

/* The memo value a BINGET / LONG_BINGET at *q names (q moves past it), or NULL. */
static Value *memo_ref(Reader *r, const unsigned char **q) {
    Py_ssize_t slot;
    if (r->end - *q >= 2 && **q == 'h') {
        slot = (*q)[1];
        *q += 2;
    } else if (r->end - *q >= 5 && **q == 'j') {
        slot = (Py_ssize_t)le(*q + 1, 4);
        *q += 5;
    } else {
        return NULL;
    }
    if (slot >= r->memo_cap || r->memo[slot].kind == -1) return NULL;
    return &r->memo[slot];
}

/* An integer opcode at *q (BININT1 / BININT2 / BININT / LONG1 of 8 bytes at most). 0 or -1. */
static int int_at(Reader *r, const unsigned char **q, int64_t *out) {
    const unsigned char *p = *q;
    Py_ssize_t left = r->end - p;
    if (left >= 2 && *p == 'K') {
        *out = p[1];
        *q += 2;
    } else if (left >= 3 && *p == 'M') {
        *out = (int64_t)le(p + 1, 2);
        *q += 3;
    } else if (left >= 5 && *p == 'J') {
        *out = (int32_t)le(p + 1, 4);
        *q += 5;
    } else if (left >= 2 && *p == 0x8a && p[1] <= 8 && left >= 2 + p[1]) {
        int n = p[1];
        uint64_t u = n ? le(p + 2, n) : 0;
        if (n && n < 8 && (p[1 + n] & 0x80)) u |= ~(uint64_t)0 << (8 * n);
        *out = (int64_t)u;
        *q += 2 + n;
    } else {
        return -1;
    }
    return 0;
}

#define MAX_FAST_FRAMES 4096

/* The common shape of a trace entry, read without the stack: EMPTY_DICT MEMOIZE MARK, keys
   from the memo, values that make no memo slot (a fresh frames list of memo items excepted),
   SETITEMS. 1: read (a row on the stack); 0: not that shape, nothing changed (the general
   opcodes read it); -1: give up. */
static int fast_entry(Reader *r) {
    const unsigned char *q = r->p; /* after '}' */
    if (r->end - q < 2 || q[0] != 0x94 || q[1] != '(') return 0;
    q += 2;
    int64_t ints[5] = {0, 0, 0, 0, -1};
    int seen[5] = {0, 0, 0, 0, 1};
    int32_t action = -1, stack = -1;
    int fresh_list = 0; /* the frames list is new: its memo slot follows the dict's */
    PyObject *items[MAX_FAST_FRAMES];
    while (q < r->end && *q != 'u') {
        Value *key = memo_ref(r, &q);
        if (!key) return 0;
        int field = field_of(r, key);
        if (field < 0) return 0;
        if (field == F_ACTION) {
            Value *v = memo_ref(r, &q);
            if (!v || v->kind != K_OBJ || !PyUnicode_CheckExact(v->o)) return 0;
            if ((action = action_code(r, v->o)) < 0) return -1;
        } else if (field < F_ACTION) {
            if (int_at(r, &q, &ints[field]) < 0) return 0;
            seen[field] = 1;
        } else if (field == F_FRAMES) {
            if (q < r->end && *q == 'N') {
                q++;
                stack = -1;
            } else if (r->end - q >= 2 && q[0] == ']' && q[1] == 0x94) {
                Py_ssize_t n = 0;
                q += 2;
                while (q < r->end && *q == '(') {
                    q++;
                    while (q < r->end && *q != 'e') {
                        Value *v = memo_ref(r, &q);
                        if (!v || v->kind != K_OBJ || n == MAX_FAST_FRAMES) return 0;
                        items[n++] = v->o;
                    }
                    if (q == r->end) return 0;
                    q++;
                }
                if (n) {
                    int64_t s = stack_of_items(r, items, n, NULL);
                    if (s < 0) return -1;
                    stack = (int32_t)s;
                }
                fresh_list = 1;
            } else {
                Value *v = memo_ref(r, &q);
                if (!v || v->kind != K_OBJ) return 0;
                if (v->o == Py_None) {
                    stack = -1;
                } else {
                    if (!PyList_CheckExact(v->o)) return 0;
                    if (PyList_GET_SIZE(v->o)) {
                        int64_t s = stack_of(r, v->o);
                        if (s < 0) return -1;
                        stack = (int32_t)s;
                    } else if (freeze(r, v->o) < 0) {
                        return -1;
                    }
                }
            }
        } else { /* a value not kept: any that makes no memo slot */
            int64_t ignored;
            if (q < r->end && (*q == 'N' || *q == 0x88 || *q == 0x89)) {
                q++;
            } else if (int_at(r, &q, &ignored) < 0) {
                Value *v = memo_ref(r, &q);
                if (!v || v->kind == K_LAZY || v->kind == K_ROW) return 0;
            }
        }
    }
    if (q == r->end || action < 0 || !seen[0] || !seen[1] || !seen[2] || !seen[3]) return 0;
    /* commit: what the general opcodes would leave */
    if (put_row(r, action, ints, stack) < 0) return -1;
    Value row = {K_ROW, r->rows++, NULL, -1};
    if (push(r, row) < 0 || memo_put(r, r->memo_len) < 0) return -1;
    if (fresh_list) { /* the list's slot holds the stack's list (or an empty one) */
        PyObject *list = stack >= 0 ? PyList_GET_ITEM(r->stacks, stack) : PyList_New(0);
        if (!list) return -1;
        if (stack >= 0) Py_INCREF(list);
        else if (freeze(r, list) < 0) return -1; /* held by the memo below */
        if (push_obj(r, list) < 0 || memo_put(r, r->memo_len) < 0) return -1;
        pop_to(r, r->depth - 1);
    }
    r->p = q + 1;
    return 1;
}

/* 1: STOP read; 0: go on; -1: give up. A frame must end where an opcode starts (a pickler
   always ends one there; the unpickler would read an opcode cut by a frame's end otherwise). */
static int step(Reader *r) {
    if (r->frame_end) {
        if (r->p > r->frame_end) return -1; /* an opcode ran past its frame's end */
        if (r->p == r->frame_end) r->frame_end = NULL;
    }
    if (!need(r, 1)) return -1;
    unsigned char op = *r->p++;
    Py_ssize_t k;
    switch (op) {
    case 0x80: /* PROTO */
        if (!need(r, 1) || *r->p < 2 || *r->p > 5) return -1; /* as the unpickler: <= 5 */
        r->p++;
        return 0;
    case 0x95: /* FRAME: never inside another, never past the end of the data */
        if (r->frame_end || !need(r, 8) || le(r->p, 8) > (uint64_t)(r->end - r->p - 8))
            return -1;
        r->frame_end = r->p + 8 + le(r->p, 8);
        r->p += 8;
        return 0;
    case '.': /* STOP */
        return r->depth > base(r) ? 1 : -1;
    case '(': /* MARK */
        if (r->n_marks == r->marks_cap) {
            Py_ssize_t cap = r->marks_cap ? r->marks_cap * 2 : 64;
            Py_ssize_t *grown = PyMem_Realloc(r->marks, cap * sizeof(Py_ssize_t));
            if (!grown) return -1;
            r->marks = grown;
            r->marks_cap = cap;
        }
        r->marks[r->n_marks++] = r->depth;
        return 0;
    case '0': /* POP: the last value, or the MARK right below it (as the unpickler does) */
        if (r->depth > base(r)) {
            pop_to(r, r->depth - 1);
        } else if (r->n_marks) {
            r->n_marks--;
        } else {
            return -1;
        }
        return 0;
    case '1': /* POP_MARK */
        if ((k = pop_mark(r)) < 0) return -1;
        pop_to(r, k);
        return 0;
    case '2': /* DUP */
        if (r->depth <= base(r) || r->stack[r->depth - 1].kind == K_LAZY ||
            r->stack[r->depth - 1].kind == K_ROW)
            return -1;
        {
            Value v = r->stack[r->depth - 1];
            v.memo = -1;
            if (v.kind == K_OBJ) Py_INCREF(v.o);
            return push(r, v);
        }
    case 'N':
        Py_INCREF(Py_None);
        return push_obj(r, Py_None);
    case 0x88:
        Py_INCREF(Py_True);
        return push_obj(r, Py_True);
    case 0x89:
        Py_INCREF(Py_False);
        return push_obj(r, Py_False);
    case 'J':
        if (!need(r, 4)) return -1;
        r->p += 4;
        return push_int(r, (int32_t)le(r->p - 4, 4));
    case 'K':
        if (!need(r, 1)) return -1;
        return push_int(r, *r->p++);
    case 'M':
        if (!need(r, 2)) return -1;
        r->p += 2;
        return push_int(r, (int64_t)le(r->p - 2, 2));
    case 0x8a: /* LONG1; past int64 (more than 8 bytes) no snapshot value is */
        if (!need(r, 1) || *r->p > 8) return -1;
        return read_long(r, *r->p++);
    case 'G': { /* BINFLOAT, big-endian */
        if (!need(r, 8)) return -1;
        double d = PyFloat_Unpack8((const char *)r->p, 0);
        r->p += 8;
        if (d == -1.0 && PyErr_Occurred()) return -1;
        return push_obj(r, PyFloat_FromDouble(d));
    }
    case 0x8c: /* SHORT_BINUNICODE */
        if (!need(r, 1)) return -1;
        return read_text(r, *r->p++, 1);
    case 'X':
        if (!need(r, 4)) return -1;
        r->p += 4;
        return read_text(r, (Py_ssize_t)le(r->p - 4, 4), 1);
    case 0x8d:
        if (!need(r, 8)) return -1;
        r->p += 8;
        return read_text(r, (Py_ssize_t)le(r->p - 8, 8), 1);
    case 'C':
        if (!need(r, 1)) return -1;
        return read_text(r, *r->p++, 0);
    case 'B':
        if (!need(r, 4)) return -1;
        r->p += 4;
        return read_text(r, (Py_ssize_t)le(r->p - 4, 4), 0);
    case 0x8e:
        if (!need(r, 8)) return -1;
        r->p += 8;
        return read_text(r, (Py_ssize_t)le(r->p - 8, 8), 0);
    case ']':
        return push_obj(r, PyList_New(0));
    case '}': {
        const unsigned char *end = r->end; /* the fast path stays within the frame */
        if (r->frame_end) r->end = r->frame_end;
        int fast = fast_entry(r);
        r->end = end;
        if (fast) return fast < 0 ? -1 : 0;
        Value v = {K_LAZY, 0, NULL, -1};
        return push(r, v);
    }
    case ')':
        return push_obj(r, PyTuple_New(0));
    case 0x85: case 0x86: case 0x87: /* TUPLE1..3 */
        k = r->depth - (op - 0x84);
        if (k < 0) return -1;
        return push_obj(r, tuple_of(r, k));
    case 't':
        if ((k = pop_mark(r)) < 0) return -1;
        return push_obj(r, tuple_of(r, k));
    case 'a':
        return appends(r, r->depth - 1);
    case 'e':
        if ((k = pop_mark(r)) < 0) return -1;
        return appends(r, k);
    case 's':
        return setitems(r, r->depth - 2);
    case 'u':
        if ((k = pop_mark(r)) < 0) return -1;
        return setitems(r, k);
    case 0x94: /* MEMOIZE */
        return memo_put(r, r->memo_len);
    case 'q':
        if (!need(r, 1)) return -1;
        return memo_put(r, *r->p++);
    case 'r':
        if (!need(r, 4)) return -1;
        r->p += 4;
        return memo_put(r, (Py_ssize_t)le(r->p - 4, 4));
    case 'h':
        if (!need(r, 1)) return -1;
        return memo_get(r, *r->p++);
    case 'j':
        if (!need(r, 4)) return -1;
        r->p += 4;
        return memo_get(r, (Py_ssize_t)le(r->p - 4, 4));
    default: /* a global, a call, text protocols, sets, ...: the restricted unpickler decides */
        return -1;
    }
}

static PyObject *column_bytes(Column *c) {
    if (PyByteArray_Resize(c->array, c->used) < 0) return NULL;
    Py_INCREF(c->array);
    return c->array;
}

#define N_COLUMNS 9
/* The reader's columns, for what is done to each alike. */
static void columns_of(Reader *r, Column *cols[N_COLUMNS]) {
    Column *all[N_COLUMNS] = {&r->action, &r->addr,     &r->size,  &r->stream,  &r->time_us,
                              &r->device_free, &r->stack_id, &r->owner, &r->position};
    memcpy(cols, all, sizeof all);
}

static void reader_free(Reader *r) {
    pop_to(r, 0);
    PyMem_Free(r->stack);
    PyMem_Free(r->marks);
    for (Py_ssize_t k = 0; k < r->memo_cap; k++)
        if (r->memo[k].kind != -1) value_clear(&r->memo[k]);
    PyMem_Free(r->memo);
    PyMem_Free(r->materialized);
    PyMem_Free(r->stack_hash);
    PyMem_Free(r->stack_slot);
    PyMem_Free(r->frozen);
    Py_XDECREF(r->owners);
    Py_XDECREF(r->frozen_lists);
    Column *cols[N_COLUMNS];
    columns_of(r, cols);
    for (int k = 0; k < N_COLUMNS; k++) Py_XDECREF(cols[k]->array);
    Py_XDECREF(r->action_codes);
    Py_XDECREF(r->actions);
    Py_XDECREF(r->stacks);
    Py_XDECREF(r->k_action);
    Py_XDECREF(r->k_addr);
    Py_XDECREF(r->k_size);
    Py_XDECREF(r->k_stream);
    Py_XDECREF(r->k_time_us);
    Py_XDECREF(r->k_device_free);
    Py_XDECREF(r->k_frames);
    for (int k = 0; k < r->n_seen; k++) Py_DECREF(r->seen_key[k]);
    for (int k = 0; k < 1024; k++) Py_XDECREF(r->known_list[k]);
}

static PyObject *read_pickle(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Reader r;
    memset(&r, 0, sizeof r);
    r.p = view.buf;
    r.end = r.p + view.len;
    Column *cols[N_COLUMNS];
    columns_of(&r, cols);
    int ok = 1;
    for (int k = 0; k < N_COLUMNS; k++) ok &= (cols[k]->array = PyByteArray_FromStringAndSize(NULL, 0)) != NULL;
    r.action_codes = PyDict_New();
    r.actions = PyList_New(0);
    r.stacks = PyList_New(0);
    r.owners = PyList_New(0);
    r.frozen_lists = PyList_New(0);
    r.k_action = PyUnicode_FromString("action");
    r.k_addr = PyUnicode_FromString("addr");
    r.k_size = PyUnicode_FromString("size");
    r.k_stream = PyUnicode_FromString("stream");
    r.k_time_us = PyUnicode_FromString("time_us");
    r.k_device_free = PyUnicode_FromString("device_free");
    r.k_frames = PyUnicode_FromString("frames");
    ok &= r.action_codes && r.actions && r.stacks && r.owners && r.frozen_lists && r.k_action && r.k_addr && r.k_size &&
          r.k_stream && r.k_time_us && r.k_device_free && r.k_frames;
    int status = ok ? 0 : -1;
    while (status == 0) status = step(&r);
    PyObject *out = NULL;
    if (status == 1 && r.depth == 1 && r.stack[0].kind == K_OBJ &&
        r.owner.used / 8 == r.rows) {
        PyObject *columns = Py_BuildValue(
            "{s:L,s:N,s:O,s:N,s:N,s:N,s:N,s:N,s:N,s:O,s:N,s:N,s:O}", "rows", (long long)r.rows,
            "action", column_bytes(&r.action), "actions", r.actions, "addr",
            column_bytes(&r.addr), "size", column_bytes(&r.size), "stream",
            column_bytes(&r.stream), "time_us", column_bytes(&r.time_us), "device_free",
            column_bytes(&r.device_free), "stack", column_bytes(&r.stack_id), "stacks",
            r.stacks, "owner", column_bytes(&r.owner), "position", column_bytes(&r.position),
            "owners", r.owners);
        if (columns) out = Py_BuildValue("(ON)", r.stack[0].o, columns);
    }
    if (!out) {
        PyErr_Clear(); /* declined: the restricted unpickler reads the file and decides */
        Py_INCREF(Py_None);
        out = Py_None;
    }
    reader_free(&r);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"read", read_pickle, METH_O, "A snapshot pickle's data and its trace as columns, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_snapshot_pickle", NULL, -1, methods};

PyMODINIT_FUNC PyInit__snapshot_pickle(void) { return PyModule_Create(&module); }
