/* The walks of `record_check` over record batches, in C: optional, and answering exactly
 * as the Python it mirrors (record_check.py stays the reference and the fallback; a test
 * compares the two on every batch of the shipped captures and on damaged ones).
 *
 *   records_clean  mirrors record_check._records_clean
 *   entries_clean  mirrors record_check._entries_clean for entries of magic 2 (record
 *                  batches: the CRC by calling `records.crc32c`, the decompression by
 *                  calling `record_check._decompressed`, both given to `configure`)
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

/* Whether the `count` records of data[pos:end] are clean (`_records_clean`). */
static int
walk_clean(const unsigned char *data, Py_ssize_t pos, Py_ssize_t end, int64_t count, int control)
{
    int64_t done = 0;
    while (pos < end && done < count) {
        pos = record_end(data, pos, end, control);
        if (pos < 0)
            return 0;
        done++;
    }
    return done == count && pos == end;
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
    int clean = walk_clean(view.buf, pos, end, count, control);
    PyBuffer_Release(&view);
    return PyBool_FromLong(clean);
}

/* -- every entry of a records field --------------------------------------------------- */

#define ENTRY_PREAMBLE 17 /* records.ENTRY_PREAMBLE: offset int64, size int32, 4 bytes, magic int8 */
#define LOG_OVERHEAD 12   /* records.LOG_OVERHEAD: offset int64, size int32 */
#define BATCH_HEADER 61   /* records.BATCH_HEADER */
#define BATCH_CRC_FROM 21 /* records.BATCH_CRC_FROM: the CRC-32C covers attributes to the end */

static PyObject *crc32c_fn, *decompressed_fn; /* records.crc32c, record_check._decompressed */

static int64_t
big_endian(const unsigned char *at, int size)
{
    uint64_t value = 0;
    for (int i = 0; i < size; i++)
        value = value << 8 | at[i];
    return (int64_t)value;
}

enum { CLEAN = 1, NOT_CLEAN = 0, FAILED = -1, LEGACY = -2 };

/* `_batch_clean` for the batch at `pos` that `_checked` found to fit, ending at `end`:
 * CLEAN or NOT_CLEAN; FAILED with an error raised. */
static int
batch_clean(PyObject *frame, const unsigned char *data, Py_ssize_t pos, Py_ssize_t end, PyObject *cap)
{
    PyObject *view = PyMemoryView_FromMemory((char *)data + pos + BATCH_CRC_FROM, end - pos - BATCH_CRC_FROM,
                                             PyBUF_READ);
    if (view == NULL)
        return FAILED;
    PyObject *crc = PyObject_CallOneArg(crc32c_fn, view);
    Py_DECREF(view);
    if (crc == NULL)
        return FAILED;
    unsigned long long computed = PyLong_AsUnsignedLongLong(crc);
    Py_DECREF(crc);
    if (computed == (unsigned long long)-1 && PyErr_Occurred())
        return FAILED;
    if (computed != (unsigned long long)big_endian(data + pos + 17, 4))
        return NOT_CLEAN;
    int attributes = (int)big_endian(data + pos + BATCH_CRC_FROM, 2);
    int64_t count = (int32_t)big_endian(data + pos + 57, 4);
    int control = (attributes & 0x20) != 0, codec = attributes & 0x07;
    if (count < 0)
        return NOT_CLEAN;
    if (!codec)
        return walk_clean(data, pos + BATCH_HEADER, end, count, control);
    /* _decompressed(data, start, end, codec, cap): the records, or None where they do not
     * decompress */
    PyObject *args[5] = {frame, PyLong_FromSsize_t(pos + BATCH_HEADER), PyLong_FromSsize_t(end),
                         PyLong_FromLong(codec), cap};
    PyObject *body = NULL;
    if (args[1] != NULL && args[2] != NULL && args[3] != NULL)
        body = PyObject_Vectorcall(decompressed_fn, args, 5, NULL);
    Py_XDECREF(args[1]);
    Py_XDECREF(args[2]);
    Py_XDECREF(args[3]);
    if (body == NULL)
        return FAILED;
    if (body == Py_None) {
        Py_DECREF(body);
        return NOT_CLEAN;
    }
    Py_buffer records;
    if (PyObject_GetBuffer(body, &records, PyBUF_SIMPLE) < 0) {
        Py_DECREF(body);
        return FAILED;
    }
    int clean = walk_clean(records.buf, 0, records.len, count, control);
    PyBuffer_Release(&records);
    Py_DECREF(body);
    return clean;
}

PyDoc_STRVAR(entries_clean_doc,
"entries_clean(data, start, end, cap, /)\n--\n\n"
"`record_check._entries_clean` where every entry is a record batch (magic 2); None at the\n"
"first legacy message set (magic 0 or 1), which the Python checks.");

static PyObject *
entries_clean(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "entries_clean takes 4 arguments");
        return NULL;
    }
    if (crc32c_fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "entries_clean before configure");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (pos < 0 || end > view.len) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE; /* the Python's to answer */
    }
    const unsigned char *data = view.buf;
    int clean = CLEAN;
    while (pos < end && clean == CLEAN) {
        /* `_checked`: anything but an entry that fits is a note */
        Py_ssize_t left = end - pos;
        if (left < ENTRY_PREAMBLE) {
            clean = NOT_CLEAN;
            break;
        }
        int64_t size = (int32_t)big_endian(data + pos + 8, 4);
        unsigned char magic = data[pos + 16];
        if (magic > 2 || size + LOG_OVERHEAD > left) {
            clean = NOT_CLEAN;
            break;
        }
        if (magic != 2) {
            clean = LEGACY;
            break;
        }
        if (size + LOG_OVERHEAD < BATCH_HEADER) {
            clean = NOT_CLEAN;
            break;
        }
        Py_ssize_t batch_end = pos + LOG_OVERHEAD + (Py_ssize_t)size;
        clean = batch_clean(args[0], data, pos, batch_end, args[3]);
        pos = batch_end;
    }
    PyBuffer_Release(&view);
    if (clean == FAILED)
        return NULL;
    if (clean == LEGACY)
        Py_RETURN_NONE;
    return PyBool_FromLong(clean);
}

PyDoc_STRVAR(configure_doc,
"configure(crc32c, decompressed, /)\n--\n\n"
"The Python functions `entries_clean` calls: `records.crc32c` and `record_check._decompressed`.");

static PyObject *
configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "configure takes 2 arguments");
        return NULL;
    }
    Py_INCREF(args[0]);
    Py_XSETREF(crc32c_fn, args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(decompressed_fn, args[1]);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"records_clean", (PyCFunction)(void (*)(void))records_clean, METH_FASTCALL, records_clean_doc},
    {"entries_clean", (PyCFunction)(void (*)(void))entries_clean, METH_FASTCALL, entries_clean_doc},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL, configure_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kdissect.decode._record_check_c",
    "The walks over record batches of `kdissect.decode.record_check` in C (optional).", -1, methods,
};

PyMODINIT_FUNC
PyInit__record_check_c(void)
{
    return PyModule_Create(&module);
}
