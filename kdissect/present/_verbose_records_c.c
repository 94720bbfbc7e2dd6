/* The -V lines of a batch that is not a control batch, in C: optional, and byte for byte
 * the text of the Python it mirrors (verbose_records.py stays the reference and the
 * fallback; a test compares the two on every batch of the shipped captures and on random
 * ones).
 *
 *   plain_batch    mirrors verbose_records._batch_lines (the batch's line, its header's
 *                  and its records', joined by newlines) but for control batches
 *   plain_records  mirrors verbose_records._plain_records (the records of a batch, joined
 *                  by newlines: what the lines it appends one by one give once joined)
 *   headers_text   mirrors verbose_records._headers_text
 *   bytes_shown    mirrors verbose_records._bytes_shown (printable ASCII here, the rest
 *                  by calling `value_display`)
 *   put_offset     mirrors `hexes` (`0x%04x` of an offset)
 *   fixed_elements mirrors the loops `verbose._Generator` generates for an array of
 *                  fixed-size structs of integers, or of integers, filling a template of
 *                  their text
 *
 * Timestamps are shown by calling verbose_records._timestamp (remembered here from one
 * record to the next: the records of a batch mostly share one), header keys that are not
 * printable ASCII by calling `tree.printable`. These and the fixed tails come from
 * `configure`, the batch header's names and tails from `configure_batches`, both called
 * once when verbose_records is imported. A compressed batch's records are the ones the
 * check decompressed just before (`record_check.decompressed`, called back).
 *
 * The Python reads a body the fast path found clean (`record_check.records_clean`). On
 * anything else (a read past the end, a value beyond 64 bits, a control batch, records
 * the check did not decompress) plain_batch and plain_records return None, and the Python
 * writes the batch as it would have.
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
    if (n <= 0) /* nothing; never less, but the compiler cannot know it */
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

/* The records of a batch that is not a control batch, `count` of them from `pos` of the
 * body: `_plain_records`' lines joined by newlines, written to `text`. `last` keeps the
 * last timestamp shown (the batch header's may be the first record's). */
static int
records_text(Buf *text, const unsigned char *body, Py_ssize_t size, Py_ssize_t pos, long long count,
             int64_t base_offset, int64_t base_time, int log_append, const char *prefix, Py_ssize_t plen,
             LastTimestamp *last)
{
    Batch batch = {body, size, prefix, plen, {NULL, NULL}, log_append, base_offset, base_time, NULL, NULL,
                   last};
    Buf lines = {NULL, 0, 0}, shown = {NULL, 0, 0};
    batch.lines = &lines;
    batch.shown = &shown;
    char *below = PyMem_Malloc(2 * (plen + 8));
    if (below == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    batch.below[0] = below;
    batch.below[1] = below + plen + 8;
    memcpy(batch.below[0], prefix, plen);
    memcpy(batch.below[0] + plen, "|       ", 8);
    memcpy(batch.below[1], prefix, plen);
    memcpy(batch.below[1] + plen, "        ", 8);
    int done = DONE;
    for (long long index = 0; index < count && done == DONE; index++) {
        if (index && PUT(text, "\n") < 0)
            done = FAILED;
        else
            done = record_text(text, &batch, pos, index, count, &pos);
    }
    PyMem_Free(lines.data);
    PyMem_Free(shown.data);
    PyMem_Free(below);
    return done;
}

/* The text written, as str; None where the Python must write it; NULL on an error. */
static PyObject *
text_result(int done, Buf *text)
{
    if (done == DONE)
        return PyUnicode_DecodeUTF8(text->data ? text->data : "", text->len, "strict");
    if (done == REFUSED)
        Py_RETURN_NONE;
    return NULL;
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
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]), plen;
    long long count = PyLong_AsLongLong(args[2]);
    int overflow_offset, overflow_time;
    int64_t base_offset = PyLong_AsLongLongAndOverflow(args[3], &overflow_offset);
    int64_t base_time = PyLong_AsLongLongAndOverflow(args[4], &overflow_time);
    int log_append = PyObject_IsTrue(args[5]);
    const char *prefix = PyUnicode_AsUTF8AndSize(args[6], &plen);
    if (PyErr_Occurred() || log_append < 0)
        return NULL;
    if (overflow_offset || overflow_time)
        Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Buf text = {NULL, 0, 0};
    LastTimestamp last = {0, NULL};
    int done = records_text(&text, view.buf, view.len, pos, count, base_offset, base_time, log_append, prefix,
                            plen, &last);
    PyBuffer_Release(&view);
    Py_XDECREF(last.shown);
    PyObject *result = text_result(done, &text);
    PyMem_Free(text.data);
    return result;
}

/* -- a whole batch ----------------------------------------------------------------------- */

/* UTF-8 text held by a str kept in `batch_texts` */
typedef struct {
    const char *text;
    Py_ssize_t len;
} Text;

#define HEADER_FIELDS 13
#define BATCH_HEADER 61 /* records.BATCH_HEADER: the header's bytes */
#define LOG_OVERHEAD 12 /* records.LOG_OVERHEAD: baseOffset and batchLength */
#define ATTRIBUTES 5    /* the attributes' place among the fields: their bits follow them */
#define BITS 5
#define CODECS 5        /* compression.COMPRESSION_NAMES: the codecs a clean batch can have */

/* the size of each field of the header, in wire order (record_nodes.BATCH_FIELDS) */
static const int field_sizes[HEADER_FIELDS] = {8, 4, 4, 1, 4, 2, 4, 8, 8, 8, 2, 4, 4};

static PyObject *decompressed_fn; /* record_check.decompressed */
static PyObject *batch_texts;     /* the tuple of str the Texts below point into */
static Text field_heads[HEADER_FIELDS], field_tails[HEADER_FIELDS]; /* "baseOffset int64", its tail */
static Text bit_heads[BITS], bit_tails[BITS]; /* "compression string", its tail */
static Text codec_names[CODECS], decompressed_tails[CODECS], timestamp_types[2];

static inline int
put_text(Buf *b, Text text)
{
    return put(b, text.text, text.len);
}

static int64_t
big_endian(const unsigned char *at, int size)
{
    uint64_t value = 0;
    for (int i = 0; i < size; i++)
        value = value << 8 | at[i];
    int shift = 64 - 8 * size; /* sign-extended: every field but the crc is signed */
    return shift ? (int64_t)(value << shift) >> shift : (int64_t)value;
}

/* `count_text(count)` */
static int
put_counted(Buf *b, int64_t count)
{
    return (put_int(b, count) < 0 || (count == 1 ? PUT(b, " record") : PUT(b, " records")) < 0) ? -1 : 0;
}

/* The lines of the magic 2 batch at `pos` of `data` (the frame's bytes, `frame` the object
 * holding them) that `_batch_lines` writes, to `b`: its line, its header's 13 lines and its
 * attributes' 5 bits (`_batch_header`), its records' line (and the decompressed one) and
 * its records (`records_text`). REFUSED for a control batch, and for anything a clean batch
 * does not hold. */
static int
batch_text(Buf *b, PyObject *frame, const unsigned char *data, Py_ssize_t size, Py_ssize_t pos,
           int64_t index, const char *branch, Py_ssize_t blen, const char *prefix, Py_ssize_t plen)
{
    if (pos < 0 || pos > size - BATCH_HEADER)
        return REFUSED;
    int64_t fields[HEADER_FIELDS];
    const unsigned char *at = data + pos;
    for (int i = 0; i < HEADER_FIELDS; i++) {
        fields[i] = big_endian(at, field_sizes[i]);
        at += field_sizes[i];
    }
    fields[4] &= 0xFFFFFFFF; /* the crc is unsigned */
    int64_t attributes = fields[ATTRIBUTES], count = fields[12];
    int codec = (int)(attributes & 0x07), control = (attributes & 0x20) != 0;
    /* a control batch is the Python's; a clean batch has a known codec, a count that is not
     * negative, and a length that holds its header within the frame */
    if (fields[3] != 2 || control || attributes < 0 || codec >= CODECS || count < 0
            || fields[1] < BATCH_HEADER - LOG_OVERHEAD || fields[1] > size - pos - LOG_OVERHEAD)
        return REFUSED;
    Py_ssize_t end = pos + LOG_OVERHEAD + (Py_ssize_t)fields[1], records = pos + BATCH_HEADER;
    int log_append = (attributes & 0x08) != 0;
    Text compression = codec_names[codec], timestamp_type = timestamp_types[log_append];

    /* the records: in the frame, or decompressed by the check just before (the Python
     * decompresses them again where the check did not) */
    PyObject *decompressed = NULL;
    Py_buffer view = {0};
    const unsigned char *body = data;
    Py_ssize_t body_size = size;
    if (codec) {
        PyObject *start = PyLong_FromSsize_t(records);
        if (start == NULL)
            return FAILED;
        decompressed = PyObject_CallFunctionObjArgs(decompressed_fn, frame, start, NULL);
        Py_DECREF(start);
        if (decompressed == NULL)
            return FAILED;
        if (decompressed == Py_None) {
            Py_DECREF(decompressed);
            return REFUSED;
        }
        if (PyObject_GetBuffer(decompressed, &view, PyBUF_SIMPLE) < 0) {
            Py_DECREF(decompressed);
            return FAILED;
        }
        body = view.buf;
        body_size = view.len;
    }

    LastTimestamp last = {0, NULL};
    int failed = 0;
    /* {branch}RecordBatch[{index}] RecordBatch = {counted}, offset {base_offset}{added}
     * [..] record batch, magic 2 */
    failed = put(b, branch, blen) < 0 || PUT(b, "RecordBatch[") < 0 || put_int(b, index) < 0
             || PUT(b, "] RecordBatch = ") < 0 || put_counted(b, count) < 0 || PUT(b, ", offset ") < 0
             || put_int(b, fields[0]) < 0
             || (codec && (PUT(b, ", ") < 0 || put_text(b, compression) < 0))
             || ((attributes & 0x10) && PUT(b, ", transactional") < 0)
             || put_span(b, pos, end - pos) < 0 || PUT(b, " record batch, magic 2") < 0;
    /* the header's fields: {prefix}+-- {head} = {display} [..]{tail}, the attributes' bits
     * after them: {prefix}|   +-- [{head} = {value}] [.., 0B]{tail} */
    Py_ssize_t field_at = pos;
    for (int i = 0; i < HEADER_FIELDS && !failed; i++) {
        failed = PUT(b, "\n") < 0 || put(b, prefix, plen) < 0 || PUT(b, "+-- ") < 0
                 || put_text(b, field_heads[i]) < 0 || PUT(b, " = ") < 0;
        if (failed)
            break;
        char hex[24];
        switch (i) {
        case 4: /* f"0x{crc:08x} (correct)" */
            snprintf(hex, sizeof hex, "0x%08llx", (unsigned long long)fields[4]);
            failed = put(b, hex, (Py_ssize_t)strlen(hex)) < 0 || PUT(b, " (correct)") < 0;
            break;
        case ATTRIBUTES: /* f"0x{attributes:04x} ({compression}, {timestamp_type})" */
            snprintf(hex, sizeof hex, "0x%04llx", (unsigned long long)attributes);
            failed = put(b, hex, (Py_ssize_t)strlen(hex)) < 0 || PUT(b, " (") < 0
                     || put_text(b, compression) < 0 || PUT(b, ", ") < 0 || put_text(b, timestamp_type) < 0
                     || PUT(b, ")") < 0;
            break;
        case 7: case 8: /* baseTimestamp, maxTimestamp */
            failed = put_timestamp(b, &last, fields[i]) < 0;
            break;
        default:
            failed = put_int(b, fields[i]) < 0;
        }
        failed = failed || put_span(b, field_at, field_sizes[i]) < 0 || put_text(b, field_tails[i]) < 0;
        if (i == ATTRIBUTES) {
            Text values[BITS] = {compression, timestamp_type, {"false", 5}, {"false", 5}, {"false", 5}};
            for (int bit = 0; bit < 3; bit++)
                if (attributes & (0x10 << bit)) /* transactional, control, delete horizon */
                    values[2 + bit] = (Text){"true", 4};
            for (int bit = 0; bit < BITS && !failed; bit++)
                failed = PUT(b, "\n") < 0 || put(b, prefix, plen) < 0 || PUT(b, "|   +-- [") < 0
                         || put_text(b, bit_heads[bit]) < 0 || PUT(b, " = ") < 0 || put_text(b, values[bit]) < 0
                         || PUT(b, "]") < 0 || put_span(b, field_at, 0) < 0 || put_text(b, bit_tails[bit]) < 0;
        }
        field_at += field_sizes[i];
    }
    /* the records' line: {prefix}+-- records ..., then the records under {prefix}    */
    Py_ssize_t records_plen = plen + 4 + (codec ? 4 : 0);
    char *records_prefix = PyMem_Malloc(records_plen + 1);
    if (records_prefix == NULL) {
        PyErr_NoMemory();
        failed = 1;
    }
    else {
        memcpy(records_prefix, prefix, plen);
        memcpy(records_prefix + plen, "        ", records_plen - plen);
    }
    if (!failed && !codec)
        failed = PUT(b, "\n") < 0 || put(b, prefix, plen) < 0 || PUT(b, "+-- records []Record = ") < 0
                 || put_counted(b, count) < 0 || put_span(b, records, end - records) < 0
                 || PUT(b, " the records of the batch") < 0;
    else if (!failed)
        failed = PUT(b, "\n") < 0 || put(b, prefix, plen) < 0 || PUT(b, "+-- records bytes = ") < 0
                 || put_int(b, end - records) < 0 || PUT(b, " bytes of ") < 0 || put_text(b, compression) < 0
                 || PUT(b, " data, ") < 0 || put_int(b, body_size) < 0 || PUT(b, " bytes decompressed") < 0
                 || put_span(b, records, end - records) < 0
                 || PUT(b, " the records of the batch, compressed\n") < 0
                 || put(b, records_prefix, plen + 4) < 0 || PUT(b, "+-- [decompressed []Record = ") < 0
                 || put_counted(b, count) < 0 || PUT(b, "]") < 0 || put_span(b, 0, body_size) < 0
                 || put_text(b, decompressed_tails[codec]) < 0;
    int done = failed ? FAILED : DONE;
    if (done == DONE && count) { /* the records' lines: none for none */
        done = PUT(b, "\n") < 0 ? FAILED
               : records_text(b, body, body_size, codec ? 0 : records, count, fields[0],
                              log_append ? fields[8] : fields[7], log_append, records_prefix, records_plen,
                              &last);
    }
    PyMem_Free(records_prefix);
    Py_XDECREF(last.shown);
    if (decompressed != NULL) {
        PyBuffer_Release(&view);
        Py_DECREF(decompressed);
    }
    return done;
}

PyDoc_STRVAR(plain_batch_doc,
"plain_batch(data, pos, index, branch, prefix, /)\n--\n\n"
"The text of `verbose_records._batch_lines` for the batch at `pos` (its lines joined by\n"
"newlines), or None where the Python must write it: a control batch, or anything unusual.");

static PyObject *
plain_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "plain_batch takes 5 arguments");
        return NULL;
    }
    if (timestamp_fn == NULL || batch_texts == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "plain_batch before configure");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]), blen, plen;
    long long index = PyLong_AsLongLong(args[2]);
    const char *branch = PyUnicode_AsUTF8AndSize(args[3], &blen);
    const char *prefix = branch == NULL ? NULL : PyUnicode_AsUTF8AndSize(args[4], &plen);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Buf text = {NULL, 0, 0};
    int done = batch_text(&text, args[0], view.buf, view.len, pos, index, branch, blen, prefix, plen);
    PyBuffer_Release(&view);
    PyObject *result = text_result(done, &text);
    PyMem_Free(text.data);
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

/* The str at `index` of the tuple `items` (or of its tuple at `inner`, when not -1) as a
 * Text; -1 with TypeError where it is not there. */
static int
text_at(PyObject *items, Py_ssize_t index, Py_ssize_t inner, Text *text)
{
    PyObject *item = PyTuple_Check(items) && index < PyTuple_GET_SIZE(items) ? PyTuple_GET_ITEM(items, index) : NULL;
    if (item != NULL && inner >= 0)
        item = PyTuple_Check(item) && inner < PyTuple_GET_SIZE(item) ? PyTuple_GET_ITEM(item, inner) : NULL;
    if (item == NULL || !PyUnicode_Check(item)) {
        PyErr_SetString(PyExc_TypeError, "configure_batches: a text is missing");
        return -1;
    }
    text->text = PyUnicode_AsUTF8AndSize(item, &text->len);
    return text->text == NULL ? -1 : 0;
}

PyDoc_STRVAR(configure_batches_doc,
"configure_batches(decompressed, fields, bits, codecs, timestamp_types, /)\n--\n\n"
"What `plain_batch` writes beside the records, from verbose_records: `record_check.decompressed`;\n"
"the header's fields as (name and type, size, tail), in wire order; the attributes' bits as\n"
"(name and type, tail); each codec's (name, tail of its decompressed records), by number;\n"
"the names of the two timestamp types.");

static PyObject *
configure_batches(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "configure_batches takes 5 arguments");
        return NULL;
    }
    PyObject *fields = args[1], *bits = args[2], *codecs = args[3], *types = args[4];
    if (!PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) != HEADER_FIELDS || !PyTuple_Check(bits)
            || PyTuple_GET_SIZE(bits) != BITS || !PyTuple_Check(codecs) || PyTuple_GET_SIZE(codecs) != CODECS
            || !PyTuple_Check(types) || PyTuple_GET_SIZE(types) != 2) {
        PyErr_SetString(PyExc_TypeError, "configure_batches: tuples of 13 fields, 5 bits, 5 codecs, 2 types");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < HEADER_FIELDS; i++) { /* the sizes C reads the header by */
        PyObject *field = PyTuple_GET_ITEM(fields, i);
        PyObject *size = PyTuple_Check(field) && PyTuple_GET_SIZE(field) == 3 ? PyTuple_GET_ITEM(field, 1) : NULL;
        if (size == NULL || !PyLong_Check(size) || PyLong_AsLong(size) != field_sizes[i]) {
            PyErr_SetString(PyExc_ValueError, "configure_batches: the header's fields are not the C's");
            return NULL;
        }
    }
    PyObject *kept = PyTuple_Pack(4, fields, bits, codecs, types); /* holds the texts */
    if (kept == NULL)
        return NULL;
    Text heads[HEADER_FIELDS], tails[HEADER_FIELDS], bheads[BITS], btails[BITS], names[CODECS],
        dtails[CODECS], ttypes[2];
    int failed = 0;
    for (Py_ssize_t i = 0; i < HEADER_FIELDS && !failed; i++)
        failed = text_at(fields, i, 0, &heads[i]) < 0 || text_at(fields, i, 2, &tails[i]) < 0;
    for (Py_ssize_t i = 0; i < BITS && !failed; i++)
        failed = text_at(bits, i, 0, &bheads[i]) < 0 || text_at(bits, i, 1, &btails[i]) < 0;
    for (Py_ssize_t i = 0; i < CODECS && !failed; i++)
        failed = text_at(codecs, i, 0, &names[i]) < 0 || text_at(codecs, i, 1, &dtails[i]) < 0;
    for (Py_ssize_t i = 0; i < 2 && !failed; i++)
        failed = text_at(types, i, -1, &ttypes[i]) < 0;
    if (failed) {
        Py_DECREF(kept);
        return NULL;
    }
    memcpy(field_heads, heads, sizeof heads);
    memcpy(field_tails, tails, sizeof tails);
    memcpy(bit_heads, bheads, sizeof bheads);
    memcpy(bit_tails, btails, sizeof btails);
    memcpy(codec_names, names, sizeof names);
    memcpy(decompressed_tails, dtails, sizeof dtails);
    memcpy(timestamp_types, ttypes, sizeof ttypes);
    Py_INCREF(args[0]);
    Py_XSETREF(decompressed_fn, args[0]);
    Py_XSETREF(batch_texts, kept);
    Py_RETURN_NONE;
}

/* -- arrays of fixed-size structs (kdissect.present.verbose) --------------------------- */

/* What a template's int asks for (verbose._fixed_template): the offset H[p + k] for k >= 0,
 * else one of these, or a field's value (FIELD_VALUE - j for the j-th). */
#define ELEMENT_INDEX (-1)
#define ELEMENT_BRANCH (-2)
#define FIELD_BRANCH (-3)
#define FIELD_VALUE (-4)
#define MAX_FIXED_FIELDS 64

/* The lines of every element, as the generated writer's loop writes them; REFUSED where an
 * element has tagged fields (or is not what the template says): the Python writes them. */
static int
elements_text(Buf *b, PyObject *items, const unsigned char *data, Py_ssize_t data_len, Py_ssize_t pos,
              Py_ssize_t size, int flexible, PyObject *branch, PyObject *middle, PyObject *final,
              PyObject *template, Py_ssize_t fields)
{
    Py_ssize_t count = PyList_GET_SIZE(items), parts = PyTuple_GET_SIZE(template);
    Py_ssize_t blen, mlen, flen;
    const char *btext = PyUnicode_AsUTF8AndSize(branch, &blen);
    const char *mtext = PyUnicode_AsUTF8AndSize(middle, &mlen);
    const char *ftext = PyUnicode_AsUTF8AndSize(final, &flen);
    if (btext == NULL || mtext == NULL || ftext == NULL)
        return FAILED;
    int64_t values[MAX_FIXED_FIELDS];
    for (Py_ssize_t i = 0; i < count; i++, pos += size + flexible) {
        if (pos < 0 || pos + size + flexible > data_len || (flexible && data[pos + size]))
            return REFUSED;
        PyObject *item = PyList_GET_ITEM(items, i), *key, *value = item;
        Py_ssize_t at = 0, j = 0;
        int overflow = 0;
        if (PyLong_CheckExact(item) && fields == 1) { /* an array of integers: each its one value */
            values[j++] = PyLong_AsLongLongAndOverflow(item, &overflow);
        } else if (PyDict_CheckExact(item) && PyDict_GET_SIZE(item) == fields) {
            while (!overflow && PyDict_Next(item, &at, &key, &value)) {
                if (!PyLong_CheckExact(value))
                    return REFUSED;
                values[j++] = PyLong_AsLongLongAndOverflow(value, &overflow);
            }
        } else {
            return REFUSED;
        }
        if (overflow)
            return REFUSED;
        if (i > 0 && PUT(b, "\n") < 0)
            return FAILED;
        for (Py_ssize_t k = 0; k < parts; k++) {
            PyObject *part = PyTuple_GET_ITEM(template, k);
            int done;
            if (PyUnicode_Check(part)) {
                done = put_str(b, part);
            } else {
                long code = PyLong_AsLong(part);
                if (code >= 0)
                    done = put_offset(b, pos + code);
                else if (code == ELEMENT_INDEX)
                    done = put_int(b, i);
                else if (code == ELEMENT_BRANCH)
                    done = put(b, btext, blen);
                else if (code == FIELD_BRANCH)
                    done = i < count - 1 ? put(b, mtext, mlen) : put(b, ftext, flen);
                else
                    done = put_int(b, values[FIELD_VALUE - code]);
            }
            if (done < 0)
                return FAILED;
        }
    }
    return DONE;
}

PyDoc_STRVAR(fixed_elements_doc,
"fixed_elements(items, data, pos, size, flexible, branch, middle, final, template, /)\n--\n\n"
"The lines of an array's elements, structs of fixed-size integers (`verbose._Generator.fixed_elements`)\n"
"or integers, joined by newlines: `items` their flat values (or the integers), at `pos` of `data`,\n"
"each `size` bytes and, when\n"
"`flexible`, an empty tagged-field block; `template` one element's text, as str and ints for\n"
"what varies (`verbose._fixed_template`). None where the Python must write them (an element with\n"
"tagged fields).");

static PyObject *
fixed_elements(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "fixed_elements takes 9 arguments");
        return NULL;
    }
    PyObject *items = args[0], *template = args[8];
    if (!PyList_Check(items) || !PyTuple_Check(template) || !PyUnicode_Check(args[5])
            || !PyUnicode_Check(args[6]) || !PyUnicode_Check(args[7])) {
        PyErr_SetString(PyExc_TypeError, "fixed_elements: a list, bytes, ints, three str and a tuple");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[2]), size = PyLong_AsSsize_t(args[3]);
    int flexible = PyObject_IsTrue(args[4]);
    if ((pos == -1 || size == -1 || flexible < 0) && PyErr_Occurred())
        return NULL;
    Py_ssize_t fields = 0; /* how many values the template reads, which each element must have */
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(template); k++) {
        PyObject *part = PyTuple_GET_ITEM(template, k);
        if (PyUnicode_Check(part))
            continue;
        long code = PyLong_Check(part) ? PyLong_AsLong(part) : LONG_MIN;
        if (code == -1 && PyErr_Occurred())
            return NULL;
        if (code < FIELD_VALUE - (MAX_FIXED_FIELDS - 1) || code > (1 << 16)) {
            PyErr_SetString(PyExc_ValueError, "fixed_elements: a template's int is out of range");
            return NULL;
        }
        if (code <= FIELD_VALUE && FIELD_VALUE - code + 1 > fields)
            fields = FIELD_VALUE - code + 1;
    }
    if (size < 0 || PyList_GET_SIZE(items) == 0)
        Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Buf text = {NULL, 0, 0};
    int done = elements_text(&text, items, view.buf, view.len, pos, size, flexible != 0, args[5], args[6], args[7],
                             template, fields);
    PyBuffer_Release(&view);
    PyObject *result = text_result(done, &text);
    PyMem_Free(text.data);
    return result;
}

static PyMethodDef methods[] = {
    {"plain_records", (PyCFunction)(void (*)(void))plain_records, METH_FASTCALL, plain_records_doc},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL, configure_doc},
    {"plain_batch", (PyCFunction)(void (*)(void))plain_batch, METH_FASTCALL, plain_batch_doc},
    {"configure_batches", (PyCFunction)(void (*)(void))configure_batches, METH_FASTCALL,
     configure_batches_doc},
    {"fixed_elements", (PyCFunction)(void (*)(void))fixed_elements, METH_FASTCALL, fixed_elements_doc},
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
