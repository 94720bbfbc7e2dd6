/* The per-record walk of `record_check`, in C: optional, and answering exactly as the
 * Python it mirrors (record_check.py stays the reference and the fallback; a test
 * compares the two on every batch of the shipped captures and on damaged ones).
 *
 *   records_clean  mirrors record_check._records_clean
 *   record_end     mirrors record_check._record_end
 *   bytes_end      mirrors record_check._bytes_end
 *   kd_zigzag      mirrors records.zigzag_varint (_varint.h)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_varint.h"

#define CONTROL_KEY_SIZE 4 /* version int16 + type int16 */

/* `_bytes_end`: the end of varint-length bytes, or -1 where `records._varbytes` objects;
 * their length (-1: null) in *length. */
static Py_ssize_t
bytes_end(const unsigned char *data, Py_ssize_t pos, Py_ssize_t end, int64_t *length)
{
    int wide;
    Py_ssize_t at = kd_zigzag(data, pos, end, 5, length, &wide);
    if (at < 0 || *length < -1)
        return -1;
    if (*length == -1)
        return at;
    if (*length > end - at)
        return -1;
    return at + (Py_ssize_t)*length;
}

/* `_record_end`: where the record at `pos` ends when `records._record` reads it without
 * complaint; -1 else. */
static Py_ssize_t
record_end(const unsigned char *data, Py_ssize_t pos, Py_ssize_t end, int control)
{
    int64_t length, value;
    int wide;
    Py_ssize_t at = kd_zigzag(data, pos, end, 5, &length, &wide);
    if (at < 0 || length < 6 || length > end - at)
        return -1;
    Py_ssize_t stop = at + (Py_ssize_t)length;
    at += 1; /* attributes */
    at = kd_zigzag(data, at, stop, 10, &value, &wide); /* timestamp delta: only its end counts */
    if (at < 0)
        return -1;
    at = kd_zigzag(data, at, stop, 5, &value, &wide); /* offset delta */
    if (at < 0)
        return -1;
    at = bytes_end(data, at, stop, &length); /* the key */
    if (at < 0 || (control && length < CONTROL_KEY_SIZE))
        return -1;
    at = bytes_end(data, at, stop, &length); /* the value */
    if (at < 0)
        return -1;
    int64_t headers;
    at = kd_zigzag(data, at, stop, 5, &headers, &wide);
    if (at < 0 || headers < 0 || 2 * headers > stop - at)
        return -1;
    for (int64_t index = 0; index < headers; index++) {
        at = bytes_end(data, at, stop, &length);
        if (at < 0 || length < 0) /* a header key may not be null */
            return -1;
        at = bytes_end(data, at, stop, &length);
        if (at < 0)
            return -1;
    }
    return at == stop ? stop : -1;
}

PyDoc_STRVAR(records_clean_doc,
"records_clean(data, pos, end, count, control, /)\n--\n\n"
"`record_check._records_clean`: whether `count` records exactly fill data[pos:end].");

static PyObject *
records_clean(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "records_clean takes 5 arguments");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    long long count = PyLong_AsLongLong(args[3]);
    int control = PyObject_IsTrue(args[4]);
    if (PyErr_Occurred() || control < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (pos < 0 || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "records_clean: bounds outside the data");
        return NULL;
    }
    const unsigned char *data = view.buf;
    long long done = 0;
    int clean = 1;
    while (pos < end && done < count) {
        pos = record_end(data, pos, end, control);
        if (pos < 0) {
            clean = 0;
            break;
        }
        done++;
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(clean && done == count && pos == end);
}

static PyMethodDef methods[] = {
    {"records_clean", (PyCFunction)(void (*)(void))records_clean, METH_FASTCALL, records_clean_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kdissect.decode._record_check_c",
    "The per-record walk of `kdissect.decode.record_check` in C (optional).", -1, methods,
};

PyMODINIT_FUNC
PyInit__record_check_c(void)
{
    return PyModule_Create(&module);
}
