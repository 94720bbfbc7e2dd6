/* The walk over a classic pcap file's record headers, in C: optional, and answering exactly
 * as the Python it mirrors (capture.py stays the reference and the fallback; a test
 * compares the two on every shipped and third-party capture, on files hypothesis writes
 * and on damaged ones).
 *
 *   record_heads  mirrors capture._record_heads: up to `count` record headers from
 *                 `position`, each record's captured length giving where the next begins,
 *                 and each header's four fields
 *   flow_buckets  mirrors parallel._python_buckets: the connection bucket of each record
 *                 that is a plain Ethernet IPv4 TCP segment, -1 for any other (the
 *                 `--jobs` share plan, which the parent makes before the workers start)
 *
 * It is the loop of `PcapIndex.chunks` that runs once per record (530,000 times in 100 MB
 * of mixed traffic), and it runs before the `--jobs` workers start (and in each of them
 * again for a large file): time no other process can share. Each header's fields are read
 * here while it is at hand (numpy, taking them from the positions afterwards, took as
 * long again as the walk); the timestamps are made of them with numpy, a chunk at once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#define RECORD_HEADER 16 /* seconds, sub-second part, captured length, original length */

/* What stopped a walk short of `count` headers and of the end of the data: capture.HEADER_CUT
 * and capture.TOO_LONG, which name the problem (NotIndexable's message). */
enum { WHOLE = 0, HEADER_CUT = 1, TOO_LONG = 2 };

/* The 32-bit field at `at` of a record header, in the file's byte order. */
static uint32_t
header_field(const unsigned char *at, int big_endian)
{
    if (big_endian)
        return (uint32_t)at[0] << 24 | (uint32_t)at[1] << 16 | (uint32_t)at[2] << 8 | at[3];
    return (uint32_t)at[3] << 24 | (uint32_t)at[2] << 16 | (uint32_t)at[1] << 8 | at[0];
}

/* Asks for the memory at `at` before it is read (where the compiler can): a walk whose
 * next place is known only once a header is read would otherwise wait for memory at
 * every record. */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(at) __builtin_prefetch(at)
#else
#define PREFETCH(at) ((void)0)
#endif
#define PREFETCH_AHEAD 4096 /* bytes: the walk over the headers asks this far ahead of itself */
#define COLUMNS 5 /* where each header starts; its seconds, sub-second part, captured and original lengths */

PyDoc_STRVAR(record_heads_doc,
"record_heads(data, position, count, big_endian, limit, /)\n--\n\n"
"`capture._record_heads`: (native int64 bytes, five columns one after the other, a value\n"
"per header: where it starts, its seconds, sub-second part, captured length and original\n"
"length; where the walk stopped; what stopped it: 0, HEADER_CUT or TOO_LONG).");

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
    PyObject *heads = PyBytes_FromStringAndSize(NULL, COLUMNS * room * (Py_ssize_t)sizeof(int64_t));
    if (heads == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int64_t *out = (int64_t *)PyBytes_AS_STRING(heads); /* a bytes object's data is aligned */
    Py_ssize_t done = 0;
    int problem = WHOLE;
    while (done < room) {
        if (position >= end)
            break;
        if (end - position < RECORD_HEADER) {
            problem = HEADER_CUT;
            break;
        }
        const unsigned char *header = data + position;
        if (end - position > PREFETCH_AHEAD)
            PREFETCH(header + PREFETCH_AHEAD);
        uint32_t captured = header_field(header + 8, big_endian);
        out[done] = position;
        out[room + done] = header_field(header, big_endian);
        out[2 * room + done] = header_field(header + 4, big_endian);
        out[3 * room + done] = captured;
        out[4 * room + done] = header_field(header + 12, big_endian);
        done++;
        if ((long long)captured > limit) {
            problem = TOO_LONG;
            break;
        }
        position += RECORD_HEADER + (int64_t)captured;
    }
    PyBuffer_Release(&view);
    if (done < room) { /* the columns moved up against each other, then the rest cut off */
        for (int column = 1; column < COLUMNS; column++)
            memmove(out + column * done, out + column * room, (size_t)done * sizeof(int64_t));
        if (_PyBytes_Resize(&heads, COLUMNS * done * (Py_ssize_t)sizeof(int64_t)) < 0)
            return NULL;
    }
    return Py_BuildValue("(NLi)", heads, (long long)position, problem);
}

/* A big-endian 16-bit field of a packet. */
static unsigned
be16(const unsigned char *at)
{
    return (unsigned)at[0] << 8 | at[1];
}

#define FLOW_HEAD 48 /* the bytes of a record the plan reads: Ethernet, IPv4 and TCP up to its data offset */
#define BUCKETS 64   /* reassembly.CLOSED_BUCKETS */
#define PREFETCH_RECORDS 8 /* the buckets' loop asks for the record this many ahead */

/* An endpoint as reassembly.flow_bucket writes it: its 4 address bytes, then its port in
 * decimal digits; the length written. */
static size_t
endpoint(unsigned char *out, const unsigned char *address, unsigned port)
{
    memcpy(out, address, 4);
    char digits[5];
    size_t length = 0;
    do { /* least significant first */
        digits[length++] = (char)('0' + port % 10);
        port /= 10;
    } while (port);
    for (size_t at = 0; at < length; at++)
        out[4 + at] = (unsigned char)digits[length - 1 - at];
    return 4 + length;
}

/* Buckets of recent flows: a record's 12 bytes of addresses and ports (as sent), and the
 * bucket they gave, in a slot chosen by those bytes. Records of one connection come in
 * runs and return, so most records find theirs here rather than formatting their
 * endpoints and hashing the text again. */
#define FLOW_SLOTS 256
typedef struct {
    unsigned char flow[12];
    signed char bucket; /* -1: the slot is empty */
} FlowSlot;

static int flow_bucket_of(const unsigned char *head);

/* The bucket of the record at `head` (FLOW_HEAD bytes of it, `captured` in all), or -1
 * when it is not a plain Ethernet IPv4 TCP segment (what parallel._plain_tcp checks);
 * `slots`: the recent flows' buckets, kept up to date. */
static int
flow_bucket(const unsigned char *head, int64_t captured, FlowSlot *slots)
{
    unsigned total = be16(head + 16), data_offset = head[46];
    int64_t start = 34 + (int64_t)(data_offset >> 4) * 4;
    if (be16(head + 12) != 0x0800 || head[14] != 0x45 || head[23] != 6 || (be16(head + 20) & 0x3FFF) != 0
        || data_offset < 0x50 || start > 14 + (int64_t)total || start > captured)
        return -1;
    const unsigned char *flow = head + 26; /* source and destination addresses, then ports */
    uint32_t mix = 0;
    for (int at = 0; at < 12; at++)
        mix = mix * 31 + flow[at];
    FlowSlot *slot = &slots[(mix ^ (mix >> 16)) % FLOW_SLOTS];
    if (slot->bucket >= 0 && memcmp(slot->flow, flow, 12) == 0)
        return slot->bucket;
    memcpy(slot->flow, flow, 12);
    slot->bucket = (signed char)flow_bucket_of(head);
    return slot->bucket;
}

/* The bucket of a plain Ethernet IPv4 TCP segment's connection, as reassembly.flow_bucket
 * computes it. */
static int
flow_bucket_of(const unsigned char *head)
{
    /* The endpoints lower one first, as Python sorts (address bytes, port) pairs. */
    const unsigned char *source = head + 26, *destination = head + 30;
    unsigned source_port = be16(head + 34), destination_port = be16(head + 36);
    int order = memcmp(source, destination, 4);
    int source_first = order < 0 || (order == 0 && source_port <= destination_port);
    unsigned char text[2 * (4 + 5) + 1];
    size_t length = source_first ? endpoint(text, source, source_port) : endpoint(text, destination, destination_port);
    text[length++] = ' ';
    length += source_first ? endpoint(text + length, destination, destination_port)
                           : endpoint(text + length, source, source_port);
    return (int)(crc32(0L, text, (uInt)length) % BUCKETS);
}

PyDoc_STRVAR(flow_buckets_doc,
"flow_buckets(data, starts, captured, /)\n--\n\n"
"`parallel._python_buckets`: the bucket of each record of an Ethernet capture (its data at\n"
"`starts`, `captured` bytes long: native int64 each), -1 where no plan can say, as bytes\n"
"(int8 each).");

static PyObject *
flow_buckets(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "flow_buckets takes 3 arguments");
        return NULL;
    }
    Py_buffer data, starts, captured;
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &starts, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    if (PyObject_GetBuffer(args[2], &captured, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&starts);
        PyBuffer_Release(&data);
        return NULL;
    }
    PyObject *buckets = NULL;
    Py_ssize_t count = starts.len / (Py_ssize_t)sizeof(int64_t);
    if (starts.len % (Py_ssize_t)sizeof(int64_t) || captured.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "flow_buckets: starts and captured must be int64 of one length");
        goto done;
    }
    buckets = PyBytes_FromStringAndSize(NULL, count);
    if (buckets == NULL)
        goto done;
    signed char *out = (signed char *)PyBytes_AS_STRING(buckets);
    const unsigned char *bytes = data.buf;
    FlowSlot slots[FLOW_SLOTS];
    for (int at = 0; at < FLOW_SLOTS; at++)
        slots[at].bucket = -1;
    for (Py_ssize_t index = 0; index < count; index++) {
        int64_t start, length;
        if (index + PREFETCH_RECORDS < count) { /* the record read that many from now, on its way */
            int64_t later;
            memcpy(&later, (const char *)starts.buf + (index + PREFETCH_RECORDS) * (Py_ssize_t)sizeof later,
                   sizeof later);
            if (later >= 0 && later < (int64_t)data.len)
                PREFETCH(bytes + later);
        }
        memcpy(&start, (const char *)starts.buf + index * (Py_ssize_t)sizeof start, sizeof start);
        memcpy(&length, (const char *)captured.buf + index * (Py_ssize_t)sizeof length, sizeof length);
        if (length < FLOW_HEAD) {
            out[index] = -1;
            continue;
        }
        if (start < 0 || start > (int64_t)data.len - FLOW_HEAD) {
            Py_CLEAR(buckets);
            PyErr_SetString(PyExc_ValueError, "flow_buckets: a record beyond the data");
            goto done;
        }
        out[index] = (signed char)flow_bucket(bytes + start, length, slots);
    }
done:
    PyBuffer_Release(&captured);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&data);
    return buckets;
}

static PyMethodDef methods[] = {
    {"record_heads", (PyCFunction)(void (*)(void))record_heads, METH_FASTCALL, record_heads_doc},
    {"flow_buckets", (PyCFunction)(void (*)(void))flow_buckets, METH_FASTCALL, flow_buckets_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kdissect.ingest._pcap_index_c",
    "The walk over a classic pcap file's record headers of `kdissect.ingest.capture`, and the\n"
    "buckets of its records of `kdissect.parallel`'s share plan, in C (optional).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__pcap_index_c(void)
{
    return PyModule_Create(&module);
}
