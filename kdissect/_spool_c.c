/* A worker's copy of its text into its ring (`kdissect.spool.Ring.put`), in C: optional,
 * and giving the same bytes as the Python it mirrors (spool.py stays the reference and the
 * fallback; tests/test_jobs_spool.py compares the two).
 *
 *   put(memory, at, text)  `text` (bytes, or a str of ASCII characters only: its characters
 *                          are its bytes, copied without encoding it first) copied into the
 *                          writable buffer `memory` at offset `at`.
 *
 *   place(memory, header, end, text)
 *                          `spool.place`: where a ring puts `text` and the text copied
 *                          there (its whole memory given: its header, then the ring).
 *
 *   place_lines(memory, header, end, lines, least)
 *                          `spool.place_lines`: `"\n".join(lines)` placed so, joined
 *                          straight into the ring rather than into a str first.
 *
 * The text of --jobs -V is written once into the ring and read by nothing but the output
 * (the kernel, when it is written out): copies of a few kilobytes and more bypass the
 * caches (non-temporal stores), which the worker's and the other workers' own data keep. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define STREAMED 4096 /* the least a copy streamed past the caches */

static void
copy(char *to, const char *from, Py_ssize_t length)
{
#if defined(__SSE2__)
    if (length >= STREAMED) {
        Py_ssize_t head = (Py_ssize_t)((16 - ((uintptr_t)to & 15)) & 15);
        memcpy(to, from, (size_t)head);
        to += head;
        from += head;
        length -= head;
        for (; length >= 64; to += 64, from += 64, length -= 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)from), b = _mm_loadu_si128((const __m128i *)(from + 16)),
                    c = _mm_loadu_si128((const __m128i *)(from + 32)),
                    d = _mm_loadu_si128((const __m128i *)(from + 48));
            _mm_stream_si128((__m128i *)to, a);
            _mm_stream_si128((__m128i *)(to + 16), b);
            _mm_stream_si128((__m128i *)(to + 32), c);
            _mm_stream_si128((__m128i *)(to + 48), d);
        }
        _mm_sfence(); /* the streamed stores are done before the ring's place is told */
    }
#endif
    memcpy(to, from, (size_t)length);
}

/* The text's bytes and length (bytes, or a str of ASCII characters only); -1 when it is neither. */
static int
text_bytes(PyObject *text, const char **from, Py_ssize_t *length)
{
    if (PyBytes_Check(text)) {
        *from = PyBytes_AS_STRING(text);
        *length = PyBytes_GET_SIZE(text);
        return 0;
    }
    if (PyUnicode_Check(text) && PyUnicode_READY(text) == 0 && PyUnicode_IS_ASCII(text)) {
        *from = (const char *)PyUnicode_DATA(text);
        *length = PyUnicode_GET_LENGTH(text);
        return 0;
    }
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "a text is bytes, or a str of ASCII characters");
    return -1;
}

/* The text's bytes and the writable buffer `memory`, taken for a copy (the buffer to be
 * released by the caller); -1 with an exception set when either cannot be. */
static int
take(PyObject *memory, PyObject *text, Py_buffer *view, const char **from, Py_ssize_t *length)
{
    if (text_bytes(text, from, length) < 0)
        return -1;
    return PyObject_GetBuffer(memory, view, PyBUF_WRITABLE);
}

static PyObject *
put(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "put(memory, at, text)");
        return NULL;
    }
    Py_ssize_t at = PyLong_AsSsize_t(args[1]);
    const char *from;
    Py_ssize_t length;
    Py_buffer memory;
    if ((at == -1 && PyErr_Occurred()) || take(args[0], args[2], &memory, &from, &length) < 0)
        return NULL;
    if (at < 0 || length > memory.len - at) {
        PyBuffer_Release(&memory);
        PyErr_SetString(PyExc_ValueError, "a text beyond the ring");
        return NULL;
    }
    copy((char *)memory.buf + at, from, length);
    PyBuffer_Release(&memory);
    Py_RETURN_NONE;
}

/* The ring in `memory` (its `header` bytes, the first eight how far the merging process has
 * written it out, then the ring): where a text of `length` bytes goes when the next one goes
 * at logical offset `end` (a text lies whole: one that would pass the ring's end starts the
 * next turn), its offset in the ring in `*at`; -1 when the ring has no room for it now, -2
 * with an exception set when `memory` is not a ring's. */
static long long
ring_start(const Py_buffer *memory, Py_ssize_t header, long long end, long long length, long long *at)
{
    long long size = (long long)memory->len - header;
    if (header < 8 || header % 8 || size <= 0 || ((uintptr_t)memory->buf & 7) || end < 0) {
        PyErr_SetString(PyExc_ValueError, "place: not a ring's memory");
        return -2;
    }
    long long start = end;
    *at = end % size;
    if (*at + length > size) {
        start += size - *at;
        *at = 0;
    }
    /* how far the merging process has written the ring out: an aligned 8-byte word,
     * loaded whole (it may be older than the merge's latest, never torn) */
    long long written = __atomic_load_n((const int64_t *)memory->buf, __ATOMIC_ACQUIRE);
    return start + length - written > size ? -1 : start;
}

static PyObject *
place(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "place(memory, header, end, text)");
        return NULL;
    }
    Py_ssize_t header = PyLong_AsSsize_t(args[1]);
    long long end = PyLong_AsLongLong(args[2]), at;
    const char *from;
    Py_ssize_t length;
    Py_buffer memory;
    if (PyErr_Occurred() || take(args[0], args[3], &memory, &from, &length) < 0)
        return NULL;
    long long start = ring_start(&memory, header, end, length, &at);
    if (start >= 0)
        copy((char *)memory.buf + header + at, from, length);
    PyBuffer_Release(&memory);
    return start < -1 ? NULL : PyLong_FromLongLong(start);
}

static PyObject *
place_lines(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "place_lines(memory, header, end, lines, least)");
        return NULL;
    }
    Py_ssize_t header = PyLong_AsSsize_t(args[1]);
    long long end = PyLong_AsLongLong(args[2]), least = PyLong_AsLongLong(args[4]), at;
    PyObject *lines = args[3];
    if (PyErr_Occurred())
        return NULL;
    if (!PyList_CheckExact(lines)) /* as spool.place_lines */
        Py_RETURN_NONE;
    Py_ssize_t count = PyList_GET_SIZE(lines);
    long long length = count ? count - 1 : 0; /* the newlines between them */
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *line = PyList_GET_ITEM(lines, i);
        if (!PyUnicode_Check(line) || PyUnicode_READY(line) < 0 || !PyUnicode_IS_ASCII(line)) {
            PyErr_Clear();
            Py_RETURN_NONE; /* joined and encoded by the caller */
        }
        length += PyUnicode_GET_LENGTH(line);
    }
    if (length < least)
        Py_RETURN_NONE;
    Py_buffer memory;
    if (PyObject_GetBuffer(args[0], &memory, PyBUF_WRITABLE) < 0)
        return NULL;
    long long start = ring_start(&memory, header, end, length, &at);
    if (start >= 0) {
        char *to = (char *)memory.buf + header + at;
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *line = PyList_GET_ITEM(lines, i);
            Py_ssize_t size = PyUnicode_GET_LENGTH(line);
            if (i)
                *to++ = '\n';
            copy(to, (const char *)PyUnicode_DATA(line), size);
            to += size;
        }
    }
    PyBuffer_Release(&memory);
    if (start < -1)
        return NULL;
    if (start < 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(LL)", start, length);
}

static PyMethodDef methods[] = {
    {"put", (PyCFunction)(void (*)(void))put, METH_FASTCALL, "put(memory, at, text): spool.Ring.put's copy, in C"},
    {"place", (PyCFunction)(void (*)(void))place, METH_FASTCALL,
     "place(memory, header, end, text): spool.place, in C"},
    {"place_lines", (PyCFunction)(void (*)(void))place_lines, METH_FASTCALL,
     "place_lines(memory, header, end, lines, least): spool.place_lines, in C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kdissect._spool_c",
    "A worker's copy of its text into its ring of `kdissect.spool`, in C (optional).", -1, methods,
};

PyMODINIT_FUNC
PyInit__spool_c(void)
{
    return PyModule_Create(&module);
}
