/* The longest path through a dependency graph (optional accelerator of
   hta_lite.analyses.critical_path.path.longest_distances, which holds the same pass in Python
   and documents it).

   longest(n_nodes, src, dst, weight) -> (dist, best, order, cut)

   src, dst, weight: int64 buffers of one length (the edges, in the order they were added).
   Kahn's algorithm, first in first out, from the nodes without incoming edges in node order;
   each node takes its longest incoming path, the first such edge in edge order. When the
   nodes left all wait on one another (a cycle: an inconsistent trace), the edges among them
   that do not run forward in node order are cut and the pass goes on from the nodes left
   without incoming edges, in node order.

   dist, best, order: bytearrays of int64 (per node: the longest path ending there in weight
   units, its last edge or -1; the nodes in the order taken); cut: the edges cut. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

static int int64_view(PyObject *obj, Py_buffer *view, Py_ssize_t *count, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (view->itemsize != 8 || !view->format || (view->format[0] != 'q' && view->format[0] != 'l')) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s: an int64 buffer is needed", what);
        return -1;
    }
    *count = view->len / 8;
    return 0;
}

static PyObject *longest(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t n, m = 0, m_dst = 0, m_weight = 0;
    PyObject *src_obj, *dst_obj, *weight_obj;
    if (!PyArg_ParseTuple(args, "nOOO", &n, &src_obj, &dst_obj, &weight_obj)) return NULL;
    if (n < 0) return PyErr_Format(PyExc_ValueError, "n_nodes < 0");
    Py_buffer sb, db, wb;
    if (int64_view(src_obj, &sb, &m, "src") < 0) return NULL;
    if (int64_view(dst_obj, &db, &m_dst, "dst") < 0) {
        PyBuffer_Release(&sb);
        return NULL;
    }
    if (int64_view(weight_obj, &wb, &m_weight, "weight") < 0) {
        PyBuffer_Release(&sb);
        PyBuffer_Release(&db);
        return NULL;
    }
    const int64_t *src = sb.buf, *dst = db.buf, *weight = wb.buf;
    PyObject *out = NULL, *dist_b = NULL, *best_b = NULL, *order_b = NULL;
    Py_ssize_t *in_start = NULL, *out_start = NULL, *in_list = NULL, *out_list = NULL;
    Py_ssize_t *deg = NULL, *queue = NULL;
    char *alive = NULL, *done = NULL;
    if (m_dst != m || m_weight != m) {
        PyErr_SetString(PyExc_ValueError, "src, dst and weight differ in length");
        goto end;
    }
    for (Py_ssize_t e = 0; e < m; e++) {
        if (src[e] < 0 || src[e] >= n || dst[e] < 0 || dst[e] >= n) {
            PyErr_Format(PyExc_ValueError, "edge %zd joins a node outside 0..%zd", e, n - 1);
            goto end;
        }
    }
    dist_b = PyByteArray_FromStringAndSize(NULL, n * 8);
    best_b = PyByteArray_FromStringAndSize(NULL, n * 8);
    order_b = PyByteArray_FromStringAndSize(NULL, n * 8);
    in_start = calloc(n + 1, sizeof *in_start);
    out_start = calloc(n + 1, sizeof *out_start);
    in_list = malloc((m ? m : 1) * sizeof *in_list);
    out_list = malloc((m ? m : 1) * sizeof *out_list);
    deg = calloc(n ? n : 1, sizeof *deg);
    queue = malloc((n ? n : 1) * sizeof *queue);
    alive = malloc(m ? m : 1);
    done = calloc(n ? n : 1, 1);
    if (!dist_b || !best_b || !order_b || !in_start || !out_start || !in_list || !out_list ||
        !deg || !queue || !alive || !done) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto end;
    }
    int64_t *dist = (int64_t *)PyByteArray_AS_STRING(dist_b);
    int64_t *best = (int64_t *)PyByteArray_AS_STRING(best_b);
    int64_t *order = (int64_t *)PyByteArray_AS_STRING(order_b);
    /* incoming and outgoing edges of each node, in edge order (a counting sort) */
    for (Py_ssize_t e = 0; e < m; e++) {
        in_start[dst[e] + 1]++;
        out_start[src[e] + 1]++;
        alive[e] = 1;
    }
    for (Py_ssize_t v = 0; v < n; v++) {
        deg[v] = in_start[v + 1];
        in_start[v + 1] += in_start[v];
        out_start[v + 1] += out_start[v];
    }
    for (Py_ssize_t v = 0; v < n; v++) queue[v] = 0; /* fill counters */
    for (Py_ssize_t e = 0; e < m; e++) {
        in_list[in_start[dst[e]] + queue[dst[e]]++] = e;
    }
    for (Py_ssize_t v = 0; v < n; v++) queue[v] = 0;
    for (Py_ssize_t e = 0; e < m; e++) {
        out_list[out_start[src[e]] + queue[src[e]]++] = e;
    }
    Py_ssize_t head = 0, tail = 0, taken = 0, cut = 0;
    for (Py_ssize_t v = 0; v < n; v++) {
        dist[v] = 0;
        best[v] = -1;
        if (deg[v] == 0) queue[tail++] = v;
    }
    for (;;) {
        while (head < tail) {
            Py_ssize_t v = queue[head++];
            done[v] = 1;
            order[taken++] = v;
            int64_t top = 0, pick = -1;
            for (Py_ssize_t k = in_start[v]; k < in_start[v + 1]; k++) {
                Py_ssize_t e = in_list[k];
                if (!alive[e]) continue;
                int64_t d = dist[src[e]] + weight[e];
                if (pick < 0 || d > top) {
                    top = d;
                    pick = e;
                }
            }
            dist[v] = top;
            best[v] = pick;
            for (Py_ssize_t k = out_start[v]; k < out_start[v + 1]; k++) {
                Py_ssize_t e = out_list[k];
                if (alive[e] && --deg[dst[e]] == 0 && tail < n) queue[tail++] = dst[e];
            }
        }
        if (taken == n) break;
        for (Py_ssize_t e = 0; e < m; e++) {
            if (alive[e] && !done[src[e]] && !done[dst[e]] && src[e] >= dst[e]) {
                alive[e] = 0;
                deg[dst[e]]--;
                cut++;
            }
        }
        Py_ssize_t before = tail;
        for (Py_ssize_t v = 0; v < n && tail < n; v++) {
            if (!done[v] && deg[v] == 0) queue[tail++] = v;
        }
        if (tail == before) break; /* cannot happen: what is left runs forward in node order */
    }
    if (PyByteArray_Resize(order_b, taken * 8) < 0) goto end;
    out = Py_BuildValue("(OOOn)", dist_b, best_b, order_b, cut);
end:
    Py_XDECREF(dist_b);
    Py_XDECREF(best_b);
    Py_XDECREF(order_b);
    free(in_start);
    free(out_start);
    free(in_list);
    free(out_list);
    free(deg);
    free(queue);
    free(alive);
    free(done);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&db);
    PyBuffer_Release(&wb);
    return out;
}

static PyMethodDef methods[] = {
    {"longest", longest, METH_VARARGS, "(dist, best, order, cut) of a graph's longest paths."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_longest_path", NULL, -1, methods};

PyMODINIT_FUNC PyInit__longest_path(void) { return PyModule_Create(&module); }
