/* A worker's detail line of the report given the page's string indexes, in C: optional,
 * and giving the same text as the Python it mirrors (report._python_remapped stays the
 * reference and the fallback; tests/test_report_details.py compares the two).
 *
 *   remapped(line, mapping)  `line`, an ASCII str of JSON as report.detail_line makes it
 *                            ([bytes, node], a node [name, type, display, offset, size,
 *                            about, children, ...], children a list of nodes), with each
 *                            node's items 0, 1 and 5 (indexes into the worker's string
 *                            table) replaced by mapping[index]; `mapping` a buffer of
 *                            int64 (array('q')). ValueError on anything else.
 *
 * The line is walked as tokens (strings, brackets, commas, and runs of anything else), an
 * open array's kind and item count on a stack: the line's own array, a node, a node's
 * children, or any other array (notes). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

enum kind { LINE, NODE, CHILDREN, OTHER };

typedef struct {
    char *data;
    Py_ssize_t length, size;
} buffer;

static int
grow(buffer *out, Py_ssize_t more)
{
    if (out->length + more <= out->size)
        return 0;
    Py_ssize_t size = out->size * 2;
    if (size < out->length + more)
        size = out->length + more;
    char *data = PyMem_Realloc(out->data, (size_t)size);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->data = data;
    out->size = size;
    return 0;
}

static int
append(buffer *out, const char *from, Py_ssize_t length)
{
    if (grow(out, length) < 0)
        return -1;
    memcpy(out->data + out->length, from, (size_t)length);
    out->length += length;
    return 0;
}

static PyObject *
failed(const char *why, Py_ssize_t at)
{
    PyErr_Format(PyExc_ValueError, "not a detail line: %s at character %zd", why, at);
    return NULL;
}

/* `value` (0 or more) in decimal at `to`; how many digits */
static int
decimal(char *to, long long value)
{
    char digits[24];
    int count = 0;
    unsigned long long left = value < 0 ? 0 : (unsigned long long)value;
    do {
        digits[count++] = (char)('0' + left % 10);
        left /= 10;
    } while (left);
    for (int i = 0; i < count; i++)
        to[i] = digits[count - 1 - i];
    return count;
}

static PyObject *
remapped(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "remapped() takes 2 arguments (%zd given)", nargs);
    PyObject *line = args[0];
    if (!PyUnicode_Check(line))
        return PyErr_Format(PyExc_TypeError, "remapped() line must be str, not %.100s", Py_TYPE(line)->tp_name);
    if (!PyUnicode_IS_ASCII(line))
        return failed("a character beyond ASCII", 0);
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const long long *mapping = (const long long *)view.buf;
    Py_ssize_t mapped = view.len / (Py_ssize_t)sizeof(long long);
    const char *text = (const char *)PyUnicode_1BYTE_DATA(line);
    Py_ssize_t length = PyUnicode_GET_LENGTH(line);
    buffer out = {NULL, 0, 0};
    Py_ssize_t depth = 0, room = 0, copied = 0; /* text before `copied` is in `out` */
    unsigned char *kinds = NULL;
    Py_ssize_t *items = NULL;
    PyObject *result = NULL;
    if (grow(&out, length + 64) < 0)
        goto done;
    Py_ssize_t at = 0;
    while (at < length) {
        char c = text[at];
        Py_ssize_t start = at;
        if (c == '"') {
            for (at++; at < length && text[at] != '"'; at++)
                if (text[at] == '\\')
                    at++;
            if (at >= length) {
                failed("a string without its end", start);
                goto done;
            }
            at++;
            continue;
        }
        if (c == '[') {
            unsigned char kind = LINE;
            if (depth > 0) {
                unsigned char parent = kinds[depth - 1];
                Py_ssize_t item = items[depth - 1];
                kind = (parent == LINE && item == 1) || parent == CHILDREN ? NODE
                       : parent == NODE && item == 6                        ? CHILDREN
                                                                            : OTHER;
            }
            if (depth == room) {
                room = room ? room * 2 : 64;
                unsigned char *more_kinds = PyMem_Realloc(kinds, (size_t)room);
                if (more_kinds == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                kinds = more_kinds;
                Py_ssize_t *more_items = PyMem_Realloc(items, (size_t)room * sizeof(Py_ssize_t));
                if (more_items == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                items = more_items;
            }
            kinds[depth] = kind;
            items[depth] = 0;
            depth++;
            at++;
            continue;
        }
        if (c == ']' || c == ',') {
            if (depth == 0) {
                failed(c == ']' ? "a ']' closing nothing" : "a ',' outside the line's array", at);
                goto done;
            }
            if (c == ']')
                depth--;
            else
                items[depth - 1]++;
            at++;
            continue;
        }
        for (at++; at < length && text[at] != '[' && text[at] != ']' && text[at] != ',' && text[at] != '"'; at++)
            ;
        Py_ssize_t item = depth ? items[depth - 1] : -1;
        if (!depth || kinds[depth - 1] != NODE || (item != 0 && item != 1 && item != 5))
            continue;
        unsigned long long index = 0;
        if (at - start > 18) {
            failed("a node's string index that is not one", start);
            goto done;
        }
        for (Py_ssize_t i = start; i < at; i++) {
            if (text[i] < '0' || text[i] > '9') {
                failed("a node's string index that is not one", start);
                goto done;
            }
            index = index * 10 + (unsigned long long)(text[i] - '0');
        }
        if (index >= (unsigned long long)mapped) {
            failed("a string index out of range", start);
            goto done;
        }
        /* the text up to the index as it is, then the page's index */
        if (append(&out, text + copied, start - copied) < 0 || grow(&out, 24) < 0)
            goto done;
        out.length += decimal(out.data + out.length, mapping[index]);
        copied = at;
    }
    if (depth != 0) {
        failed("an array without its end", length);
        goto done;
    }
    if (append(&out, text + copied, length - copied) < 0)
        goto done;
    result = PyUnicode_DecodeASCII(out.data, out.length, "strict");
done:
    PyMem_Free(out.data);
    PyMem_Free(kinds);
    PyMem_Free(items);
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(remapped_doc, "remapped(line, mapping) -> str: report._python_remapped, in C");

static PyMethodDef methods[] = {
    {"remapped", (PyCFunction)(void (*)(void))remapped, METH_FASTCALL, remapped_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kdissect.present._report_c",
    "The report's detail lines given the page's string indexes (see _report_c.c).", -1, methods,
};

PyMODINIT_FUNC
PyInit__report_c(void)
{
    return PyModule_Create(&module);
}
