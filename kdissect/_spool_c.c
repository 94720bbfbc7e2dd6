/* A worker's copy of its text into its ring (`kdissect.spool.Ring.put`), in C: optional,
 * and giving the same bytes as the Python it mirrors (spool.py stays the reference and the
 * fallback; tests/test_jobs_spool.py compares the two).
 *
 *   put(memory, at, text)  `text` (bytes, or a str of ASCII characters only: its characters
 *                          are its bytes, copied without encoding it first) copied into the
 *                          writable buffer `memory` at offset `at`.
 *
 * The text of --jobs -V is written once into the ring and read by nothing but the output
 * (the kernel, when it is written out): copies of a few kilobytes and more bypass the
 * caches (non-temporal stores), which the worker's and the other workers' own data keep. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
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

static PyObject *
put(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "put(memory, at, text)");
        return NULL;
    }
    Py_ssize_t at = PyLong_AsSsize_t(args[1]);
    if (at == -1 && PyErr_Occurred())
        return NULL;
    PyObject *text = args[2];
    const char *from;
    Py_ssize_t length;
    if (PyBytes_Check(text)) {
        from = PyBytes_AS_STRING(text);
        length = PyBytes_GET_SIZE(text);
    } else if (PyUnicode_Check(text) && PyUnicode_READY(text) == 0 && PyUnicode_IS_ASCII(text)) {
        from = (const char *)PyUnicode_DATA(text);
        length = PyUnicode_GET_LENGTH(text);
    } else {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a text is bytes, or a str of ASCII characters");
        return NULL;
    }
    Py_buffer memory;
    if (PyObject_GetBuffer(args[0], &memory, PyBUF_WRITABLE) < 0)
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

static PyMethodDef methods[] = {
    {"put", (PyCFunction)(void (*)(void))put, METH_FASTCALL, "put(memory, at, text): spool.Ring.put's copy, in C"},
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
