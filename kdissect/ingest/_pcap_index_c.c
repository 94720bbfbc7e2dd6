/* The walk over a classic pcap file's record headers, in C: optional, and answering exactly
 * as the Python it mirrors (capture.py stays the reference and the fallback; a test
 * compares the two on every shipped and third-party capture, on files hypothesis writes
 * and on damaged ones).
 *
 *   record_heads  mirrors capture._record_heads: up to `count` record headers from
 *                 `position`, each record's captured length giving where the next begins
 *
 * It is the loop of `PcapIndex.chunks` that runs once per record (530,000 times in 100 MB
 * of mixed traffic), and it runs before the `--jobs` workers start (and in each of them
 * again for a large file): time no other process can share. What is done once per chunk
 * (reading the headers' fields with numpy, from the positions given here) stays in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define RECORD_HEADER 16 /* seconds, sub-second part, captured length, original length */

/* What stopped a walk short of `count` headers and of the end of the data: capture.HEADER_CUT
 * and capture.TOO_LONG, which name the problem (NotIndexable's message). */
enum { WHOLE = 0, HEADER_CUT = 1, TOO_LONG = 2 };

/* The captured length of the record header at `header`, in the file's byte order. */
static uint32_t
captured_length(const unsigned char *header, int big_endian)
{
    const unsigned char *at = header + 8; /* after the seconds and the sub-second part */
    if (big_endian)
        return (uint32_t)at[0] << 24 | (uint32_t)at[1] << 16 | (uint32_t)at[2] << 8 | at[3];
    return (uint32_t)at[3] << 24 | (uint32_t)at[2] << 16 | (uint32_t)at[1] << 8 | at[0];
}

PyDoc_STRVAR(record_heads_doc,
"record_heads(data, position, count, big_endian, limit, /)\n--\n\n"
"`capture._record_heads`: (where each header starts, as native int64 bytes, where the walk\n"
"stopped, what stopped it: 0, HEADER_CUT or TOO_LONG).");

static PyObject *
record_heads(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "record_heads takes 5 arguments");
        return NULL;
    }
    /* int64 (as the positions are written), not Py_ssize_t: on any platform, a position
     * past the end (the last record cut short) is returned as the Python computes it */
    int64_t position = PyLong_AsLongLong(args[1]);
    Py_ssize_t count = PyLong_AsSsize_t(args[2]);
    int big_endian = PyObject_IsTrue(args[3]);
    long long limit = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred() || big_endian < 0)
        return NULL;
    if (position < 0 || count < 0) {
        PyErr_SetString(PyExc_ValueError, "record_heads: a negative position or count");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *data = view.buf;
    Py_ssize_t end = view.len;
    /* Each header the walk passes takes 16 bytes of the data at least, so it passes no more
     * than `room` of them before it reaches the end: room enough, and never much more than
     * the data holds. Stopping at `room` stops where the Python's loop stops (at `count`
     * headers, or at the end). */
    Py_ssize_t room = position < end ? (Py_ssize_t)((end - position + RECORD_HEADER - 1) / RECORD_HEADER) : 0;
    if (room > count)
        room = count;
    PyObject *heads = PyBytes_FromStringAndSize(NULL, room * (Py_ssize_t)sizeof(int64_t));
    if (heads == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    char *out = PyBytes_AS_STRING(heads);
    Py_ssize_t done = 0;
    int problem = WHOLE;
    while (done < room) {
        if (position >= end)
            break;
        if (end - position < RECORD_HEADER) {
            problem = HEADER_CUT;
            break;
        }
        memcpy(out + done * (Py_ssize_t)sizeof position, &position, sizeof position);
        done++;
        uint32_t captured = captured_length(data + position, big_endian);
        if ((long long)captured > limit) {
            problem = TOO_LONG;
            break;
        }
        position += RECORD_HEADER + (int64_t)captured;
    }
    PyBuffer_Release(&view);
    if (done < room && _PyBytes_Resize(&heads, done * (Py_ssize_t)sizeof(int64_t)) < 0)
        return NULL;
    return Py_BuildValue("(NLi)", heads, (long long)position, problem);
}

static PyMethodDef methods[] = {
    {"record_heads", (PyCFunction)(void (*)(void))record_heads, METH_FASTCALL, record_heads_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kdissect.ingest._pcap_index_c",
    "The walk over a classic pcap file's record headers of `kdissect.ingest.capture` in C (optional).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__pcap_index_c(void)
{
    return PyModule_Create(&module);
}
