/* The -V lines of the records of a batch that is not a control batch, in C: optional, and
 * byte for byte the text of the Python it mirrors (verbose_records.py stays the reference
 * and the fallback; a test compares the two on every batch of the shipped captures and on
 * random ones).
 *
 *   plain_records  mirrors verbose_records._plain_records (the records of a batch, joined
 *                  by newlines: what the lines it appends one by one give once joined)
 *   headers_text   mirrors verbose_records._headers_text
 *   bytes_shown    mirrors verbose_records._bytes_shown (printable ASCII here, the rest
 *                  by calling `value_display`)
 *   put_offset     mirrors `hexes` (`0x%04x` of an offset)
 *
 * Timestamps are shown by calling verbose_records._timestamp (remembered here from one
 * record to the next: the records of a batch mostly share one), header keys that are not
 * printable ASCII by calling `tree.printable`. These and the fixed tails come from
 * `configure`, called once when verbose_records is imported.
 *
 * The Python reads a body the fast path found clean (`record_check.records_clean`). On
 * anything else (a read past the end, a value beyond 64 bits) plain_records returns None
 * before writing anything, and the Python writes the batch as it would have.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include "../decode/_varint.h"

#define MAX_VALUE_BYTES 64 /* record_nodes.MAX_VALUE_BYTES */

static PyObject *timestamp_fn, *value_display_fn, *printable_fn;
static PyObject *create_tail, *log_append_tail, *offset_tail; /* str */

/* -- a growing UTF-8 buffer ------------------------------------------------------------ */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int
grow(Buf *b, Py_ssize_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    char *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int
put(Buf *b, const char *text, Py_ssize_t n)
{
    if (n == 0)
        return 0;
    if (grow(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, text, n);
    b->len += n;
    return 0;
}

#define PUT(b, literal) put((b), (literal), (Py_ssize_t)sizeof(literal) - 1)

static int
put_str(Buf *b, PyObject *text)
{
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &n);
    return utf8 == NULL ? -1 : put(b, utf8, n);
}

/* Python's str() of an int */
static int
put_int(Buf *b, int64_t value)
{
    char digits[24];
    int n = 0;
    uint64_t magnitude = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    do {
        digits[sizeof digits - 1 - n++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude);
    if (value < 0)
        digits[sizeof digits - 1 - n++] = '-';
    return put(b, digits + sizeof digits - n, n);
}

/* f"0x{offset:04x}", as `hexes` gives it */
static int
put_offset(Buf *b, Py_ssize_t offset)
{
    static const char hex[] = "0123456789abcdef";
    char digits[20];
    int n = 0;
    uint64_t rest = (uint64_t)offset;
    do {
        digits[sizeof digits - 1 - n++] = hex[rest & 0xF];
        rest >>= 4;
    } while (rest || n < 4);
    if (grow(b, n + 2) < 0)
        return -1;
    b->data[b->len++] = '0';
    b->data[b->len++] = 'x';
    memcpy(b->data + b->len, digits + sizeof digits - n, n);
    b->len += n;
    return 0;
}

/* " [{H[offset]}, {size}B]" */
static int
put_span(Buf *b, Py_ssize_t offset, int64_t size)
{
    if (PUT(b, " [") < 0 || put_offset(b, offset) < 0 || PUT(b, ", ") < 0 || put_int(b, size) < 0)
        return -1;
    return PUT(b, "B]");
}

/* -- the fields ------------------------------------------------------------------------ */

static inline int
printable_ascii(const unsigned char *raw, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (raw[i] < 0x20 || raw[i] > 0x7E)
            return 0;
    return 1;
}

/* `_bytes_shown`: a key or value that is not null, as its display. */
static int
bytes_shown(Buf *b, const unsigned char *raw, Py_ssize_t n)
{
    if (n <= MAX_VALUE_BYTES ? printable_ascii(raw, n) : printable_ascii(raw, MAX_VALUE_BYTES)) {
        if (PUT(b, "\"") < 0 || put(b, (const char *)raw, n <= MAX_VALUE_BYTES ? n : MAX_VALUE_BYTES) < 0
                || PUT(b, "\"") < 0)
            return -1;
        if (n <= MAX_VALUE_BYTES)
            return 0;
        if (PUT(b, "... (") < 0 || put_int(b, n) < 0)
            return -1;
        return PUT(b, " bytes)");
    }
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)raw, n);
    if (bytes == NULL)
        return -1;
    PyObject *shown = PyObject_CallOneArg(value_display_fn, bytes);
    Py_DECREF(bytes);
    if (shown == NULL)
        return -1;
    int done = put_str(b, shown);
    Py_DECREF(shown);
    return done;
}

/* A header key (never null) as `_headers_text` quotes it. */
static int
header_key(Buf *b, const unsigned char *raw, Py_ssize_t n)
{
    if (PUT(b, "\"") < 0)
        return -1;
    if (printable_ascii(raw, n)) {
        if (put(b, (const char *)raw, n) < 0)
            return -1;
    }
    else {
        /* raw.decode("ascii") and raw.decode("utf-8", "replace") agree on ASCII, and
         * `printable` returns printable text as it is */
        PyObject *key = PyUnicode_DecodeUTF8((const char *)raw, n, "replace");
        if (key == NULL)
            return -1;
        PyObject *shown = PyObject_CallOneArg(printable_fn, key);
        Py_DECREF(key);
        if (shown == NULL)
            return -1;
        int done = put_str(b, shown);
        Py_DECREF(shown);
        if (done < 0)
            return -1;
    }
    return PUT(b, "\"");
}

/* Results of the walkers: written, an error raised, or input the Python must handle. */
enum { DONE = 0, FAILED = -1, REFUSED = -2 };

/* A varint `_plain_records` reads with `varint(body, at, size, 10)` after `body[at]`:
 * its end, or REFUSED where the Python would read out of the body or get a value C
 * cannot hold. */
static inline Py_ssize_t
read_varint(const unsigned char *body, Py_ssize_t at, Py_ssize_t size, int64_t *value)
{
    int wide;
    if (at < 0 || at >= size)
        return REFUSED;
    Py_ssize_t end = kd_zigzag(body, at, size, 10, value, &wide);
    return end < 0 || wide ? REFUSED : end;
}

/* `_headers_text`: the headers of a record, their count at `pos` and the first at `at`;
 * `prefix` and `plen` are `h[:-4]` of the record. Their lines are written to `lines`
 * first (the line above them gives the end of the last), the key's and the value's
 * displays to `shown` (each is written twice). */
static int
headers_text(Buf *b, Buf *lines, Buf *shown, const unsigned char *body, Py_ssize_t size,
             Py_ssize_t pos, Py_ssize_t at, int64_t count, const char *prefix, Py_ssize_t plen)
{
    Py_ssize_t count_end = at;
    Buf *s = lines;
    s->len = 0;
    for (int64_t index = 0; index < count; index++) {
        Py_ssize_t start = at;
        int64_t key_length, value_length;
        Py_ssize_t b0 = read_varint(body, at, size, &key_length);
        if (b0 < 0)
            return (int)b0;
        if (key_length < 0 || key_length > size - b0)
            return REFUSED; /* a null key or one past the end: never in a clean body */
        Py_ssize_t b1 = b0 + (Py_ssize_t)key_length;
        Py_ssize_t b2 = read_varint(body, b1, size, &value_length);
        if (b2 < 0)
            return (int)b2;
        Py_ssize_t b3 = b2;
        if (value_length >= 0) {
            if (value_length > size - b2)
                return REFUSED;
            b3 = b2 + (Py_ssize_t)value_length;
        }
        shown->len = 0;
        if (header_key(shown, body + b0, b1 - b0) < 0)
            return FAILED;
        Py_ssize_t key_end = shown->len;
        if (value_length < 0 ? PUT(shown, "null") < 0 : bytes_shown(shown, body + b2, b3 - b2) < 0)
            return FAILED;
        const char *key = shown->data, *value = shown->data + key_end;
        Py_ssize_t value_size = shown->len - key_end;
        const char *tree = index < count - 1 ? "|   +-- " : "    +-- ";
        /* \n{c}Header[{index}] Header = {key} = {value_shown} [..] a record header ... */
        if (PUT(s, "\n") < 0 || put(s, prefix, plen) < 0 || PUT(s, "+-- Header[") < 0
                || put_int(s, index) < 0 || PUT(s, "] Header = ") < 0 || put(s, key, key_end) < 0
                || PUT(s, " = ") < 0 || put(s, value, value_size) < 0
                || put_span(s, start, b3 - start) < 0 || PUT(s, " a record header\n") < 0
                || put(s, prefix, plen) < 0 || put(s, tree, 8) < 0
                || PUT(s, "headerKeyLength varint = ") < 0 || put_int(s, key_length) < 0
                || put_span(s, start, b0 - start) < 0 || PUT(s, " bytes of the key\n") < 0
                || put(s, prefix, plen) < 0 || put(s, tree, 8) < 0
                || PUT(s, "headerKey string = ") < 0 || put(s, key, key_end) < 0
                || put_span(s, b0, key_length) < 0 || PUT(s, " the header's key\n") < 0
                || put(s, prefix, plen) < 0 || put(s, tree, 8) < 0
                || PUT(s, "headerValueLength varint = ") < 0
                || (value_length < 0 ? PUT(s, "-1 (null)") : put_int(s, value_length)) < 0
                || put_span(s, b1, b2 - b1) < 0 || PUT(s, " bytes of the headerValue, -1 for null") < 0)
            return FAILED;
        if (value_length >= 0
                && (PUT(s, "\n") < 0 || put(s, prefix, plen) < 0 || put(s, tree, 8) < 0
                    || PUT(s, "headerValue bytes = ") < 0 || put(s, value, value_size) < 0
                    || put_span(s, b2, value_length) < 0 || PUT(s, " the record's headerValue") < 0))
            return FAILED;
        at = b3;
    }
    /* {c}headers []Header = {count_text(count, 'header')} [..] record headers
     * {prefix}+-- length varint = {count} [..] number of headers that follow{text} */
    if (put_int(b, count) < 0 || (count == 1 ? PUT(b, " header") : PUT(b, " headers")) < 0
            || put_span(b, pos, at - pos) < 0 || PUT(b, " record headers\n") < 0
            || put(b, prefix, plen) < 0 || PUT(b, "+-- length varint = ") < 0 || put_int(b, count) < 0
            || put_span(b, pos, count_end - pos) < 0 || PUT(b, " number of headers that follow") < 0
            || put(b, s->data, s->len) < 0)
        return FAILED;
    return DONE;
}

/* The timestamp's display by `_timestamp`, the last one kept. */
typedef struct {
    int64_t milliseconds;
    PyObject *shown; /* NULL: none yet */
} LastTimestamp;

static int
put_timestamp(Buf *b, LastTimestamp *last, int64_t milliseconds)
{
    if (last->shown == NULL || last->milliseconds != milliseconds) {
        PyObject *number = PyLong_FromLongLong(milliseconds);
        if (number == NULL)
            return -1;
        PyObject *shown = PyObject_CallOneArg(timestamp_fn, number);
        Py_DECREF(number);
        if (shown == NULL)
            return -1;
        Py_XSETREF(last->shown, shown);
        last->milliseconds = milliseconds;
    }
    return put_str(b, last->shown);
}

typedef struct {
    const unsigned char *body;
    Py_ssize_t size;
    const char *prefix; /* of the records' lines */
    Py_ssize_t plen;
    char *below[2]; /* h[:-4] of a record but the last, and of the last: prefix + 8 bytes */
    int log_append;
    int64_t base_offset, base_time;
    Buf *lines, *shown; /* for `headers_text` and the displays written twice */
    LastTimestamp *last;
} Batch;

/* The record at `pos`, the `index`th of `count`: its lines; its end in *next. */
static int
record_text(Buf *b, const Batch *batch, Py_ssize_t pos, int64_t index, int64_t count, Py_ssize_t *next)
{
    const unsigned char *body = batch->body;
    Py_ssize_t size = batch->size, plen = batch->plen;
    const char *prefix = batch->prefix;
    int not_last = index < count - 1;
    const char *c = not_last ? "|   +-- " : "    +-- ";
    int64_t length, delta, offset_delta, key_length, value_length, offset, timestamp;
    Py_ssize_t b0 = read_varint(body, pos, size, &length);
    if (b0 < 0)
        return (int)b0;
    Py_ssize_t b2 = read_varint(body, b0 + 1, size, &delta);
    if (b2 < 0)
        return (int)b2;
    Py_ssize_t b3 = read_varint(body, b2, size, &offset_delta);
    if (b3 < 0)
        return (int)b3;
    Py_ssize_t b4 = read_varint(body, b3, size, &key_length);
    if (b4 < 0)
        return (int)b4;
    Py_ssize_t b5 = b4;
    if (key_length >= 0) {
        if (key_length > size - b4)
            return REFUSED;
        b5 = b4 + (Py_ssize_t)key_length;
    }
    Py_ssize_t b6 = read_varint(body, b5, size, &value_length);
    if (b6 < 0)
        return (int)b6;
    Py_ssize_t b7 = b6;
    if (value_length >= 0) {
        if (value_length > size - b6)
            return REFUSED;
        b7 = b6 + (Py_ssize_t)value_length;
    }
    if (b7 >= size || __builtin_add_overflow(batch->base_offset, offset_delta, &offset))
        return REFUSED;
    if (batch->log_append)
        timestamp = batch->base_time;
    else if (__builtin_add_overflow(batch->base_time, delta, &timestamp))
        return REFUSED;
    Py_ssize_t end;
    if (__builtin_add_overflow(b0, (Py_ssize_t)length, &end) || end < 0)
        return REFUSED;
    int64_t headers = 0;
    Py_ssize_t b8 = b7 + 1;
    if (body[b7]) {
        b8 = read_varint(body, b7, size, &headers);
        if (b8 < 0)
            return (int)b8;
    }
    Buf *shown = batch->shown;
    shown->len = 0;
    if (key_length < 0 ? PUT(shown, "null") < 0 : bytes_shown(shown, body + b4, b5 - b4) < 0)
        return FAILED;
    Py_ssize_t key_end = shown->len;
    if (value_length < 0 ? PUT(shown, "null") < 0 : bytes_shown(shown, body + b6, b7 - b6) < 0)
        return FAILED;
    const char *key = shown->data, *value = shown->data + key_end;
    Py_ssize_t value_size = shown->len - key_end;

#define C() (put(b, prefix, plen) < 0 || put(b, c, 8) < 0)
    if (put(b, prefix, plen) < 0 || PUT(b, "+-- Record[") < 0 || put_int(b, index) < 0
            || PUT(b, "] Record = offset ") < 0 || put_int(b, offset) < 0 || PUT(b, ", key ") < 0
            || put(b, key, key_end) < 0 || PUT(b, ", value ") < 0 || put(b, value, value_size) < 0
            || put_span(b, pos, end - pos) < 0 || PUT(b, " a record\n") < 0
            || C() || PUT(b, "length varint = ") < 0 || put_int(b, length) < 0
            || put_span(b, pos, b0 - pos) < 0 || PUT(b, " bytes of the record after this field\n") < 0
            || C() || PUT(b, "attributes int8 = ") < 0 || put_int(b, body[b0]) < 0
            || put_span(b, b0, 1) < 0 || PUT(b, " unused\n") < 0
            || C() || PUT(b, "timestampDelta varlong = ") < 0 || put_int(b, delta) < 0
            || put_span(b, b0 + 1, b2 - b0 - 1) < 0
            || PUT(b, " timestamp minus the batch's base timestamp\n") < 0
            || C() || PUT(b, "[timestamp int64 = ") < 0 || put_timestamp(b, batch->last, timestamp) < 0
            || PUT(b, "]") < 0 || put_span(b, b2, 0) < 0
            || put_str(b, batch->log_append ? log_append_tail : create_tail) < 0 || PUT(b, "\n") < 0
            || C() || PUT(b, "offsetDelta varint = ") < 0 || put_int(b, offset_delta) < 0
            || put_span(b, b2, b3 - b2) < 0 || PUT(b, " offset minus the batch's base offset\n") < 0
            || C() || PUT(b, "[offset int64 = ") < 0 || put_int(b, offset) < 0 || PUT(b, "]") < 0
            || put_span(b, b3, 0) < 0 || put_str(b, offset_tail) < 0 || PUT(b, "\n") < 0
            || C() || PUT(b, "keyLength varint = ") < 0
            || (key_length < 0 ? PUT(b, "-1 (null)") : put_int(b, key_length)) < 0
            || put_span(b, b3, b4 - b3) < 0 || PUT(b, " bytes of the key, -1 for null") < 0)
        return FAILED;
    if (key_length >= 0
            && (PUT(b, "\n") < 0 || C() || PUT(b, "key bytes = ") < 0 || put(b, key, key_end) < 0
                || put_span(b, b4, key_length) < 0 || PUT(b, " the record's key") < 0))
        return FAILED;
    if (PUT(b, "\n") < 0 || C() || PUT(b, "valueLength varint = ") < 0
            || (value_length < 0 ? PUT(b, "-1 (null)") : put_int(b, value_length)) < 0
            || put_span(b, b5, b6 - b5) < 0 || PUT(b, " bytes of the value, -1 for null") < 0)
        return FAILED;
    if (value_length >= 0
            && (PUT(b, "\n") < 0 || C() || PUT(b, "value bytes = ") < 0 || put(b, value, value_size) < 0
                || put_span(b, b6, value_length) < 0 || PUT(b, " the record's value") < 0))
        return FAILED;
    if (PUT(b, "\n") < 0 || C() || PUT(b, "headers []Header = ") < 0)
        return FAILED;
#undef C
    const char *below = batch->below[!not_last];
    int done;
    if (body[b7]) {
        done = headers_text(b, batch->lines, shown, body, size, b7, b8, headers, below, plen + 8);
    }
    else {
        /* {c}headers []Header = 0 headers [..] record headers
         * {h}length varint = 0 [..] number of headers that follow */
        done = (PUT(b, "0 headers") < 0 || put_span(b, b7, 1) < 0 || PUT(b, " record headers\n") < 0
                || put(b, below, plen + 8) < 0 || PUT(b, "+-- length varint = 0") < 0
                || put_span(b, b7, 1) < 0 || PUT(b, " number of headers that follow") < 0) ? FAILED : DONE;
    }
    *next = end;
    return done;
}

PyDoc_STRVAR(plain_records_doc,
"plain_records(body, pos, count, base_offset, base_time, log_append, prefix, /)\n--\n\n"
"The text of `verbose_records._plain_records` (its lines joined by newlines), or None where\n"
"the Python must write it.");

static PyObject *
plain_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "plain_records takes 7 arguments");
        return NULL;
    }
    if (timestamp_fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "plain_records before configure");
        return NULL;
    }
    Batch batch;
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    long long count = PyLong_AsLongLong(args[2]);
    int overflow_offset, overflow_time;
    batch.base_offset = PyLong_AsLongLongAndOverflow(args[3], &overflow_offset);
    batch.base_time = PyLong_AsLongLongAndOverflow(args[4], &overflow_time);
    batch.log_append = PyObject_IsTrue(args[5]);
    batch.prefix = PyUnicode_AsUTF8AndSize(args[6], &batch.plen);
    if (PyErr_Occurred() || batch.log_append < 0)
        return NULL;
    if (overflow_offset || overflow_time)
        Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    batch.body = view.buf;
    batch.size = view.len;
    Buf text = {NULL, 0, 0}, lines = {NULL, 0, 0}, shown = {NULL, 0, 0};
    LastTimestamp last = {0, NULL};
    batch.lines = &lines;
    batch.shown = &shown;
    batch.last = &last;
    char *below = PyMem_Malloc(2 * (batch.plen + 8));
    if (below == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    batch.below[0] = below;
    batch.below[1] = below + batch.plen + 8;
    memcpy(batch.below[0], batch.prefix, batch.plen);
    memcpy(batch.below[0] + batch.plen, "|       ", 8);
    memcpy(batch.below[1], batch.prefix, batch.plen);
    memcpy(batch.below[1] + batch.plen, "        ", 8);
    int done = DONE;
    for (long long index = 0; index < count && done == DONE; index++) {
        if (index && PUT(&text, "\n") < 0)
            done = FAILED;
        else
            done = record_text(&text, &batch, pos, index, count, &pos);
    }
    PyBuffer_Release(&view);
    Py_XDECREF(last.shown);
    PyObject *result = NULL;
    if (done == DONE)
        result = PyUnicode_DecodeUTF8(text.data ? text.data : "", text.len, "strict");
    else if (done == REFUSED) {
        result = Py_None;
        Py_INCREF(result);
    }
    PyMem_Free(text.data);
    PyMem_Free(lines.data);
    PyMem_Free(shown.data);
    PyMem_Free(below);
    return result;
}

PyDoc_STRVAR(configure_doc,
"configure(timestamp, value_display, printable, create_time_tail, log_append_tail, offset_tail, /)\n--\n\n"
"The Python functions and tails `plain_records` uses, from verbose_records.");

static PyObject *
configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "configure takes 6 arguments");
        return NULL;
    }
    for (int i = 3; i < 6; i++) {
        if (!PyUnicode_Check(args[i])) {
            PyErr_SetString(PyExc_TypeError, "configure: the tails are str");
            return NULL;
        }
    }
    PyObject **slots[] = {&timestamp_fn, &value_display_fn, &printable_fn, &create_tail,
                          &log_append_tail, &offset_tail};
    for (int i = 0; i < 6; i++) {
        Py_INCREF(args[i]);
        Py_XSETREF(*slots[i], args[i]);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"plain_records", (PyCFunction)(void (*)(void))plain_records, METH_FASTCALL, plain_records_doc},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL, configure_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kdissect.present._verbose_records_c",
    "The -V text of a batch's records of `kdissect.present.verbose_records` in C (optional).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__verbose_records_c(void)
{
    return PyModule_Create(&module);
}
