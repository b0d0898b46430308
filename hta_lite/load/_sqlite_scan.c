/* A reader of integer columns straight from an SQLite database file's table B-tree
   (optional accelerator of hta_lite.load.readers.nsys_tables: Nsight Systems exports).

   ints(buffer, root_page, fields, rowid_field) -> bytearray of rows x len(fields) int64, or None

   buffer: the whole database file (an mmap). root_page: the table's root page (sqlite_master).
   fields: the record field of each output column, -1 for a column the table lacks (-1 values),
   -2 for the rowid; rowid_field: the field that is the table's INTEGER PRIMARY KEY (its value
   is the rowid; the record stores NULL there), -1 if none. NULL is -1, as the SQL path's
   coalesce gives.

   It reads what SQLite's file format (https://www.sqlite.org/fileformat2.html) defines for a
   rowid table: the 100-byte header (page size, reserved bytes), interior table pages (0x05) and
   leaf table pages (0x0d), cells, varints and record headers; rows come in rowid order, as a
   table scan gives them. Anything else returns None without going on, and the caller reads
   the table through SQLite: a payload that spills to overflow pages, a value of a needed field
   that is not an integer (a real, text or blob), another page type (an index, a WITHOUT ROWID
   table), a page number outside the file or met twice (a loop), a cell or record that does not
   fit its page, a tree deeper than 64 pages. Every offset read from the file is checked against
   the page it lies in; the output is sized by a first pass that counts the leaf cells of pages
   already checked, never by a number read from the file. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64
#define MAX_FIELDS 64

typedef struct {
    const unsigned char *file;
    Py_ssize_t size;
    uint32_t page_size, usable, pages;
    unsigned char *seen; /* a byte per page: visited */
} Db;

static uint32_t be16(const unsigned char *p) { return ((uint32_t)p[0] << 8) | p[1]; }
static uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* A varint at p (at most 9 bytes, none past end): its length, 0 when cut short. */
static int varint(const unsigned char *p, const unsigned char *end, uint64_t *out) {
    uint64_t v = 0;
    for (int i = 0; i < 9; i++) {
        if (p + i >= end) return 0;
        if (i == 8) {
            *out = (v << 8) | p[i];
            return 9;
        }
        v = (v << 7) | (p[i] & 0x7f);
        if (!(p[i] & 0x80)) {
            *out = v;
            return i + 1;
        }
    }
    return 0;
}

/* The page numbered n (1-based): its first byte and where its B-tree header starts, NULL when
   outside the file. */
static const unsigned char *page_at(const Db *db, uint64_t n, uint32_t *header) {
    if (n < 1 || n > db->pages) return NULL;
    *header = n == 1 ? 100 : 0;
    return db->file + (n - 1) * (uint64_t)db->page_size;
}

/* A page's cells: type, count and the cell pointer array, checked to lie in the page. */
static int cells(const Db *db, const unsigned char *page, uint32_t header, int *type,
                 uint32_t *count, const unsigned char **pointers) {
    if (header + 12 > db->usable) return -1;
    *type = page[header];
    if (*type != 0x05 && *type != 0x0d) return -1;
    *count = be16(page + header + 3);
    uint32_t head = header + (*type == 0x05 ? 12 : 8);
    if ((uint64_t)head + 2 * (uint64_t)*count > db->usable) return -1;
    *pointers = page + head;
    return 0;
}

/* The serial type's value size in bytes; -1 for the reserved types 10 and 11. */
static int64_t body_size(uint64_t t) {
    static const int sizes[] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0};
    if (t < 10) return sizes[t];
    if (t < 12) return -1;
    return (int64_t)((t - 12) / 2);
}

static int64_t be_int(const unsigned char *p, int n) {
    uint64_t v = (p[0] & 0x80) ? ~(uint64_t)0 : 0; /* sign */
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}

/* One leaf cell's record into out[0..n_fields): 0, or -1 when it cannot be read here. */
static int read_cell(const Db *db, const unsigned char *page, uint32_t at, const int *fields,
                     int n_fields, int rowid_field, int64_t *out) {
    const unsigned char *end = page + db->usable, *p = page + at;
    uint64_t payload, rowid;
    int n = varint(p, end, &payload);
    if (!n) return -1;
    p += n;
    n = varint(p, end, &rowid);
    if (!n) return -1;
    p += n;
    if (payload > db->usable - 35 || payload > (uint64_t)(end - p)) return -1; /* overflows */
    const unsigned char *rec = p, *rec_end = p + payload;
    uint64_t header_size;
    n = varint(rec, rec_end, &header_size);
    if (!n || header_size > payload || header_size < (uint64_t)n) return -1;
    const unsigned char *types = rec + n, *types_end = rec + header_size;
    const unsigned char *body = types_end;
    int64_t field_type[MAX_FIELDS];
    const unsigned char *field_at[MAX_FIELDS];
    int want_max = -1;
    for (int i = 0; i < n_fields; i++) {
        if (fields[i] > want_max) want_max = fields[i];
    }
    int k = 0;
    for (; k <= want_max && types < types_end; k++) {
        uint64_t t;
        int m = varint(types, types_end, &t);
        if (!m) return -1;
        types += m;
        int64_t size = body_size(t);
        if (size < 0 || (uint64_t)size > (uint64_t)(rec_end - body)) return -1;
        field_type[k] = (int64_t)t;
        field_at[k] = body;
        body += size;
    }
    for (int i = 0; i < n_fields; i++) {
        int f = fields[i];
        if (f == -2 || (f >= 0 && f == rowid_field)) {
            out[i] = (int64_t)rowid;
            continue;
        }
        if (f < 0 || f >= k) { /* absent, or a column added after the row was written */
            out[i] = -1;
            continue;
        }
        int64_t t = field_type[f];
        if (t == 0) out[i] = -1;
        else if (t <= 6) out[i] = be_int(field_at[f], (int)body_size((uint64_t)t));
        else if (t == 8 || t == 9) out[i] = t - 8;
        else return -1; /* a real, text or blob */
    }
    return 0;
}

/* Walks the tree from root in order: counts the leaf cells (out NULL), or reads them into out.
   Returns the rows, -1 when the tree cannot be read here. */
static int64_t walk(Db *db, uint32_t root, const int *fields, int n_fields, int rowid_field,
                    int64_t *out) {
    struct { uint32_t page; uint32_t next; } stack[MAX_DEPTH];
    int depth = 0;
    int64_t rows = 0;
    memset(db->seen, 0, db->pages + 1);
    stack[depth].page = root;
    stack[depth].next = 0;
    depth++;
    if (root < 1 || root > db->pages) return -1;
    db->seen[root] = 1;
    while (depth > 0) {
        uint32_t header, count;
        int type;
        const unsigned char *pointers;
        const unsigned char *page = page_at(db, stack[depth - 1].page, &header);
        if (!page || cells(db, page, header, &type, &count, &pointers) < 0) return -1;
        if (type == 0x0d) {
            if (out != NULL) {
                for (uint32_t c = 0; c < count; c++) {
                    uint32_t at = be16(pointers + 2 * c);
                    if (at < header + 8 || at >= db->usable) return -1;
                    if (read_cell(db, page, at, fields, n_fields, rowid_field,
                                  out + (rows + c) * n_fields) < 0)
                        return -1;
                }
            }
            rows += count;
            depth--;
            continue;
        }
        uint32_t next = stack[depth - 1].next++; /* interior: the cells' children, then the right */
        uint32_t child;
        if (next < count) {
            uint32_t at = be16(pointers + 2 * next);
            if (at < header + 12 || at + 4 > db->usable) return -1;
            child = be32(page + at);
        } else if (next == count) {
            child = be32(page + header + 8);
        } else {
            depth--;
            continue;
        }
        if (child < 1 || child > db->pages || db->seen[child] || depth >= MAX_DEPTH) return -1;
        db->seen[child] = 1;
        stack[depth].page = child;
        stack[depth].next = 0;
        depth++;
    }
    return rows;
}

static PyObject *ints(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long root;
    PyObject *field_list;
    int rowid_field;
    if (!PyArg_ParseTuple(args, "y*kO!i", &view, &root, &PyTuple_Type, &field_list, &rowid_field))
        return NULL;
    PyObject *result = NULL;
    Db db = {view.buf, view.len, 0, 0, 0, NULL};
    int fields[MAX_FIELDS];
    Py_ssize_t n_fields = PyTuple_GET_SIZE(field_list);
    if (n_fields < 1 || n_fields > MAX_FIELDS || db.size < 512 ||
        memcmp(db.file, "SQLite format 3\0", 16) != 0)
        goto none;
    for (Py_ssize_t i = 0; i < n_fields; i++) {
        long f = PyLong_AsLong(PyTuple_GET_ITEM(field_list, i));
        if (f == -1 && PyErr_Occurred()) goto done;
        if (f < -2 || f >= MAX_FIELDS) goto none;
        fields[i] = (int)f;
    }
    if (rowid_field < -1 || rowid_field >= MAX_FIELDS) goto none;
    if (db.file[19] > 2) goto none; /* a read version SQLite itself would refuse */
    db.page_size = be16(db.file + 16) == 1 ? 65536 : be16(db.file + 16);
    if (db.page_size < 512 || (db.page_size & (db.page_size - 1))) goto none;
    db.usable = db.page_size - db.file[20];
    if (db.usable < 480) goto none;
    if ((uint64_t)db.size / db.page_size > UINT32_MAX - 1) goto none;
    db.pages = (uint32_t)((uint64_t)db.size / db.page_size);
    db.seen = malloc((size_t)db.pages + 1);
    if (!db.seen) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t rows;
    Py_BEGIN_ALLOW_THREADS
    rows = walk(&db, (uint32_t)root, fields, (int)n_fields, rowid_field, NULL);
    Py_END_ALLOW_THREADS
    if (rows < 0) goto none;
    if (rows > PY_SSIZE_T_MAX / 8 / n_fields) goto none;
    result = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(rows * n_fields * 8));
    if (!result) goto done;
    int64_t *out = (int64_t *)PyByteArray_AS_STRING(result);
    int64_t again;
    Py_BEGIN_ALLOW_THREADS
    again = walk(&db, (uint32_t)root, fields, (int)n_fields, rowid_field, out);
    Py_END_ALLOW_THREADS
    if (again != rows) {
        Py_CLEAR(result);
        goto none;
    }
    goto done;
none:
    result = Py_None;
    Py_INCREF(result);
done:
    free(db.seen);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"ints", ints, METH_VARARGS,
     "ints(buffer, root_page, fields, rowid_field) -> bytearray of int64 rows, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sqlite_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sqlite_scan(void) { return PyModule_Create(&module); }
