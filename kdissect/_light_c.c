/* The parent's side of a light merge (`kdissect.light`), in C: optional, and answering
 * exactly as the Python it mirrors (light.py and pair/pairing.py stay the reference and the
 * fallback; tests compare the two, message by message and note by note).
 *
 *   Light   mirrors light.Light: the same attributes, `frame`, `link` and `all_notes`
 *   Lights  mirrors light.Lights: `round` (light.made, then Pairer.add and Sequencer.push
 *           of pair/pairing.py for each message), `made`, `one` and `finish`
 *   pack    mirrors light.pack: an event's row appended to a batch's rows (the worker's side):
 *           a usual message's fields as ints (light.plain), which `round` reads back without
 *           a tuple unpickled (`make_plain`)
 *
 * Pairing keeps each connection's requests in flight in an OrderedDict, as `Pairer` does,
 * and the notes it and releasing give are made by pairing.py's own functions (`_duplicate`,
 * `_missing`, `_out_of_order`, `_overdue`, `_unanswered`): only the usual case runs here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include "structmember.h"
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

/* From pairing.py and spool.py, when this module is imported. */
static PyObject *empty_tuple; /* a plain message's notes, of its frame and of its header */
static PyObject *piece_type, *ordered_dict, *duplicate, *missing, *out_of_order, *overdue, *unanswered;
static PyObject *str_index, *str_popitem, *default_hold_seconds, *default_hold_messages, *default_hold_bytes;
static PyObject *str_memory, *str_size, *str_ring, *str_start, *str_length, *str_notes, *str_number;
static long long header_bytes; /* spool.HEADER_BYTES: the ring's header before its bytes */
static Py_ssize_t pairer_hold; /* pairing.HOLD_MESSAGES: requests kept in flight per connection */

/* --- Light ------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *number, *connection, *is_request, *correlation_id, *expects_response, *last_ns, *size,
        *frame_notes, *notes, *pair, *asked;
} LightObject;

static PyTypeObject LightType;

#define LIGHT_FIELDS(X) X(number) X(connection) X(is_request) X(correlation_id) X(expects_response) \
    X(last_ns) X(size) X(frame_notes) X(notes) X(pair) X(asked)

static int
light_traverse(LightObject *self, visitproc visit, void *arg)
{
#define VISIT(name) Py_VISIT(self->name);
    LIGHT_FIELDS(VISIT)
#undef VISIT
    return 0;
}

static int
light_clear(LightObject *self)
{
#define CLEAR(name) Py_CLEAR(self->name);
    LIGHT_FIELDS(CLEAR)
#undef CLEAR
    return 0;
}

static void
light_dealloc(LightObject *self)
{
    PyObject_GC_UnTrack(self);
    light_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A new Light of the nine fields (references borrowed; `notes` stolen). */
static PyObject *
light_of(PyObject *number, PyObject *connection, PyObject *is_request, PyObject *correlation_id,
         PyObject *expects_response, PyObject *last_ns, PyObject *size, PyObject *frame_notes, PyObject *notes)
{
    LightObject *self = PyObject_GC_New(LightObject, &LightType);
    if (self == NULL) {
        Py_DECREF(notes);
        return NULL;
    }
    self->number = Py_NewRef(number);
    self->connection = Py_NewRef(connection);
    self->is_request = Py_NewRef(is_request);
    self->correlation_id = Py_NewRef(correlation_id);
    self->expects_response = Py_NewRef(expects_response);
    self->last_ns = Py_NewRef(last_ns);
    self->size = Py_NewRef(size);
    self->frame_notes = Py_NewRef(frame_notes);
    self->notes = notes;
    self->pair = Py_NewRef(Py_None);
    self->asked = Py_NewRef(Py_None);
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyObject *
light_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"number", "connection", "is_request", "correlation_id", "expects_response",
                            "last_ns", "size", "frame_notes", "notes", NULL};
    PyObject *f[9];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOO:Light", names, &f[0], &f[1], &f[2], &f[3], &f[4],
                                     &f[5], &f[6], &f[7], &f[8]))
        return NULL;
    return light_of(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], Py_NewRef(f[8]));
}

static PyObject *
light_frame(PyObject *self, void *closure)
{
    return Py_NewRef(self);
}

/* Light.link: `response` is this request's, and knows this request's number. */
static int
linked(LightObject *request, PyObject *response)
{
    if (request->number == NULL) {
        PyErr_SetString(PyExc_AttributeError, "Light has no number");
        return -1;
    }
    if (Py_TYPE(response) == &LightType)
        Py_XSETREF(((LightObject *)response)->asked, Py_NewRef(request->number));
    else if (PyObject_SetAttrString(response, "_asked", request->number) < 0)
        return -1;
    Py_XSETREF(request->pair, Py_NewRef(response));
    return 0;
}

static PyObject *
light_link(LightObject *self, PyObject *response)
{
    if (linked(self, response) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
light_pair_number(LightObject *self, void *closure)
{
    if (self->asked == NULL) {
        PyErr_SetString(PyExc_AttributeError, "Light has no _asked");
        return NULL;
    }
    return Py_NewRef(self->asked);
}

static PyObject *
light_all_notes(LightObject *self, PyObject *unused)
{
    if (self->frame_notes == NULL || self->notes == NULL) {
        PyErr_SetString(PyExc_AttributeError, "Light has no notes");
        return NULL;
    }
    PyObject *all = PySequence_List(self->frame_notes);
    if (all == NULL)
        return NULL;
    PyObject *joined = PySequence_InPlaceConcat(all, self->notes);
    Py_DECREF(all);
    return joined;
}

#define MEMBER(name, field) {name, T_OBJECT_EX, offsetof(LightObject, field), 0, NULL}
static PyMemberDef light_members[] = {
    MEMBER("number", number), MEMBER("connection", connection), MEMBER("is_request", is_request),
    MEMBER("correlation_id", correlation_id), MEMBER("expects_response", expects_response),
    MEMBER("last_ns", last_ns), MEMBER("size", size), MEMBER("frame_notes", frame_notes),
    MEMBER("notes", notes), MEMBER("_pair", pair), MEMBER("_asked", asked), {NULL},
};

static PyGetSetDef light_getset[] = {
    {"frame", light_frame, NULL, "Itself: what pairing reads of a frame is its own.", NULL},
    {"pair_number", (getter)light_pair_number, NULL, "As light.Light.pair_number.", NULL},
    {NULL},
};

static PyMethodDef light_methods[] = {
    {"link", (PyCFunction)light_link, METH_O, "This request's response."},
    {"all_notes", (PyCFunction)light_all_notes, METH_NOARGS, "Its frame's notes, then its own."},
    {NULL},
};

static PyTypeObject LightType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kdissect._light_c.Light",
    .tp_basicsize = sizeof(LightObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A message as a light merge makes it (light.Light, in C).",
    .tp_new = light_new,
    .tp_dealloc = (destructor)light_dealloc,
    .tp_traverse = (traverseproc)light_traverse,
    .tp_clear = (inquiry)light_clear,
    .tp_members = light_members,
    .tp_getset = light_getset,
    .tp_methods = light_methods,
};

/* --- Lights ----------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *prepared; /* dict: a message's number -> what `prepare` made of it */
    PyObject *flights;  /* dict: a connection's index -> its requests in flight (OrderedDict) */
    PyObject **queue;   /* the Sequencer's messages held, a ring of `capacity` */
    Py_ssize_t head, count, capacity;
    long long held_bytes, hold_bytes;
    Py_ssize_t hold_messages;
    long long hold_ns;
    PyObject *hold_ns_object;
} LightsObject;

static int
lights_traverse(LightsObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->prepared);
    Py_VISIT(self->flights);
    for (Py_ssize_t i = 0; i < self->count; i++)
        Py_VISIT(self->queue[(self->head + i) % self->capacity]);
    return 0;
}

static int
lights_clear(LightsObject *self)
{
    Py_CLEAR(self->prepared);
    Py_CLEAR(self->flights);
    Py_CLEAR(self->hold_ns_object);
    while (self->count) {
        PyObject *held = self->queue[self->head];
        self->head = (self->head + 1) % self->capacity;
        self->count--;
        Py_DECREF(held);
    }
    return 0;
}

static void
lights_dealloc(LightsObject *self)
{
    PyObject_GC_UnTrack(self);
    lights_clear(self);
    PyMem_Free(self->queue);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
lights_init(LightsObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"prepared", "hold_seconds", "hold_messages", "hold_bytes", NULL};
    PyObject *prepared, *seconds = default_hold_seconds, *messages = default_hold_messages,
                        *bytes = default_hold_bytes;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!|OOO:Lights", names, &PyDict_Type, &prepared, &seconds,
                                     &messages, &bytes))
        return -1;
    double hold = PyFloat_AsDouble(seconds);
    if (hold == -1.0 && PyErr_Occurred())
        return -1;
    hold = nearbyint(hold * 1e9); /* round(), as Sequencer: to even, in the default rounding mode */
    if (!(fabs(hold) < 9.2e18)) {
        PyErr_SetString(PyExc_OverflowError, "hold_seconds out of range");
        return -1;
    }
    Py_ssize_t hold_messages = PyLong_AsSsize_t(messages);
    long long hold_bytes = PyLong_AsLongLong(bytes);
    if (PyErr_Occurred())
        return -1;
    lights_clear(self); /* a second __init__ starts afresh */
    self->hold_ns = (long long)hold;
    self->hold_messages = hold_messages;
    self->hold_bytes = hold_bytes;
    self->held_bytes = 0;
    self->prepared = Py_NewRef(prepared);
    self->flights = PyDict_New();
    self->hold_ns_object = PyLong_FromLongLong(self->hold_ns);
    return self->flights != NULL && self->hold_ns_object != NULL ? 0 : -1;
}

/* A Light's field: a borrowed reference, or NULL with AttributeError where it was deleted. */
static PyObject *
field(PyObject *value, const char *name)
{
    if (value == NULL)
        PyErr_Format(PyExc_AttributeError, "Light has no %s", name);
    return value;
}
#define FIELD(light, name) field((light)->name, #name)

/* Whether a message is not settled yet (`not pairing._settled(message)`): 1, 0, -1 on error. */
static int
unsettled(LightObject *message)
{
    if (FIELD(message, is_request) == NULL || FIELD(message, pair) == NULL
        || FIELD(message, expects_response) == NULL || FIELD(message, correlation_id) == NULL)
        return -1;
    int truth = PyObject_IsTrue(message->is_request);
    if (truth <= 0 || message->pair != Py_None)
        return truth < 0 ? -1 : 0;
    truth = PyObject_IsTrue(message->expects_response);
    if (truth <= 0)
        return truth;
    return message->correlation_id != Py_None;
}

static LightObject *
as_light(PyObject *object)
{
    if (Py_TYPE(object) != &LightType) {
        PyErr_Format(PyExc_TypeError, "Lights pairs Lights, not %.100s", Py_TYPE(object)->tp_name);
        return NULL;
    }
    return (LightObject *)object;
}

/* The oldest request in flight (borrowed), or NULL with an error. */
static LightObject *
oldest(PyObject *flight)
{
    PyObject *keys = PyObject_GetIter(flight);
    if (keys == NULL)
        return NULL;
    PyObject *key = PyIter_Next(keys);
    Py_DECREF(keys);
    if (key == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "no request in flight");
        return NULL;
    }
    PyObject *found = PyDict_GetItemWithError(flight, key); /* an OrderedDict is a dict */
    Py_DECREF(key);
    if (found == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "a request in flight went missing");
        return NULL;
    }
    return as_light(found);
}

/* `flight.pop(key, None)`: a new reference, None where it is not there, NULL on error. */
static PyObject *
pop_from(PyObject *flight, PyObject *key)
{
    PyObject *found = PyDict_GetItemWithError(flight, key);
    if (found == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    Py_INCREF(found);
    if (PyObject_DelItem(flight, key) < 0) { /* through the OrderedDict, which keeps its order */
        Py_DECREF(found);
        return NULL;
    }
    return found;
}

static int
call_hook(PyObject *hook, PyObject *first, PyObject *second, PyObject *third)
{
    PyObject *result = PyObject_CallFunctionObjArgs(hook, first, second, third, NULL);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}

/* Pairer.add */
static int
pair(LightsObject *self, LightObject *message)
{
    PyObject *correlation_id = FIELD(message, correlation_id);
    if (correlation_id == NULL)
        return -1;
    if (correlation_id == Py_None)
        return 0;
    if (FIELD(message, connection) == NULL || FIELD(message, is_request) == NULL)
        return -1;
    PyObject *index = PyObject_GetAttr(message->connection, str_index);
    if (index == NULL)
        return -1;
    PyObject *flight = PyDict_GetItemWithError(self->flights, index);
    if (flight == NULL) {
        if (PyErr_Occurred() || (flight = PyObject_CallNoArgs(ordered_dict)) == NULL) {
            Py_DECREF(index);
            return -1;
        }
        int failed = PyDict_SetItem(self->flights, index, flight);
        Py_DECREF(flight); /* the dict holds it */
        if (failed) {
            Py_DECREF(index);
            return -1;
        }
    }
    Py_DECREF(index);
    int truth = PyObject_IsTrue(message->is_request);
    if (truth < 0)
        return -1;
    if (truth) {
        if (FIELD(message, expects_response) == NULL || (truth = PyObject_IsTrue(message->expects_response)) < 0)
            return -1;
        if (!truth) /* Produce with acks=0: no answer comes */
            return 0;
        PyObject *earlier = pop_from(flight, correlation_id);
        if (earlier == NULL)
            return -1;
        int failed = earlier != Py_None && call_hook(duplicate, (PyObject *)message, earlier, NULL) < 0;
        Py_DECREF(earlier);
        if (failed || PyObject_SetItem(flight, correlation_id, (PyObject *)message) < 0)
            return -1;
        if (PyObject_Length(flight) > pairer_hold) {
            PyObject *dropped = PyObject_CallMethodObjArgs(flight, str_popitem, Py_False, NULL);
            if (dropped == NULL)
                return -1;
            Py_DECREF(dropped);
        }
        return 0;
    }
    PyObject *found = pop_from(flight, correlation_id);
    if (found == NULL)
        return -1;
    if (found == Py_None) {
        Py_DECREF(found);
        return call_hook(missing, (PyObject *)message, NULL, NULL);
    }
    LightObject *request = as_light(found);
    int in_order = 1; /* the oldest in flight: the usual case */
    if (request != NULL && PyObject_Length(flight) > 0) {
        LightObject *first = oldest(flight);
        in_order = first == NULL || FIELD(first, number) == NULL || FIELD(request, number) == NULL ? -1
            : PyObject_RichCompareBool(first->number, request->number, Py_GE);
        if (in_order == 0 && call_hook(out_of_order, (PyObject *)message, (PyObject *)first, NULL) < 0)
            in_order = -1;
    }
    if (request == NULL || in_order < 0) {
        Py_DECREF(found);
        return -1;
    }
    int failed = linked(request, (PyObject *)message);
    Py_DECREF(found);
    return failed;
}

/* `newest - then <= hold_ns`: 1, 0, -1 on error. */
static int
within_hold(LightsObject *self, PyObject *newest, PyObject *then)
{
    int overflow_newest, overflow_then;
    long long a = PyLong_AsLongLongAndOverflow(newest, &overflow_newest);
    long long b = PyLong_AsLongLongAndOverflow(then, &overflow_then);
    long long since;
    if (PyErr_Occurred())
        PyErr_Clear(); /* not an int: as Python computes it, below */
    else if (!overflow_newest && !overflow_then && !__builtin_sub_overflow(a, b, &since))
        return since <= self->hold_ns;
    PyObject *difference = PyNumber_Subtract(newest, then);
    if (difference == NULL)
        return -1;
    int within = PyObject_RichCompareBool(difference, self->hold_ns_object, Py_LE);
    Py_DECREF(difference);
    return within;
}

static int
size_of(LightObject *message, long long *size)
{
    if (FIELD(message, size) == NULL)
        return -1;
    *size = PyLong_AsLongLong(message->size);
    return *size == -1 && PyErr_Occurred() ? -1 : 0;
}

/* (message, prepared.pop(message.number, None)) appended to `released`; a request knows
 * the number of its response so far (light.Lights._released). */
static int
release(LightsObject *self, LightObject *message, PyObject *released)
{
    if (FIELD(message, number) == NULL || FIELD(message, is_request) == NULL || FIELD(message, pair) == NULL)
        return -1;
    int truth = PyObject_IsTrue(message->is_request);
    if (truth < 0)
        return -1;
    if (truth) {
        PyObject *asked = message->pair == Py_None ? Py_NewRef(Py_None)
            : PyObject_GetAttrString(message->pair, "number");
        if (asked == NULL)
            return -1;
        Py_XSETREF(message->asked, asked);
    }
    PyObject *ready = pop_from(self->prepared, message->number);
    if (ready == NULL)
        return -1;
    PyObject *both = PyTuple_Pack(2, (PyObject *)message, ready);
    Py_DECREF(ready);
    if (both == NULL)
        return -1;
    int failed = PyList_Append(released, both);
    Py_DECREF(both);
    return failed;
}

static LightObject *
head_of(LightsObject *self)
{
    return (LightObject *)self->queue[self->head];
}

static void
drop_head(LightsObject *self)
{
    PyObject *head = self->queue[self->head];
    self->head = (self->head + 1) % self->capacity;
    self->count--;
    Py_DECREF(head);
}

/* Sequencer.push: what it releases appended to `released`. */
static int
push(LightsObject *self, LightObject *message, PyObject *released)
{
    long long size;
    if (size_of(message, &size) < 0 || FIELD(message, last_ns) == NULL)
        return -1;
    if (self->count == self->capacity) {
        Py_ssize_t capacity = self->capacity ? 2 * self->capacity : 64;
        PyObject **queue = PyMem_New(PyObject *, capacity);
        if (queue == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < self->count; i++)
            queue[i] = self->queue[(self->head + i) % self->capacity];
        PyMem_Free(self->queue);
        self->queue = queue;
        self->head = 0;
        self->capacity = capacity;
    }
    self->queue[(self->head + self->count) % self->capacity] = Py_NewRef((PyObject *)message);
    self->count++;
    self->held_bytes += size;
    PyObject *newest = message->last_ns;
    Py_INCREF(newest); /* the message may be released, and let go, below */
    int result = 0;
    while (self->count) {
        LightObject *head = head_of(self);
        int waits = unsettled(head);
        if (waits > 0) {
            if (FIELD(head, last_ns) == NULL) {
                result = -1;
                break;
            }
            int within = self->count <= self->hold_messages && self->held_bytes <= self->hold_bytes
                ? within_hold(self, newest, head->last_ns) : 0;
            if (within != 0) {
                result = within < 0 ? -1 : 0;
                break; /* the oldest still waits for its answer, and may */
            }
            PyObject *later = PyLong_FromSsize_t(self->count - 1);
            if (later == NULL || call_hook(overdue, (PyObject *)head, newest, later) < 0) {
                Py_XDECREF(later);
                result = -1;
                break;
            }
            Py_DECREF(later);
        }
        if (waits < 0 || size_of(head, &size) < 0 || release(self, head, released) < 0) {
            result = -1;
            break;
        }
        self->held_bytes -= size;
        drop_head(self);
    }
    Py_DECREF(newest);
    return result;
}

static int
settle(LightsObject *self, LightObject *light, PyObject *released)
{
    return pair(self, light) < 0 || push(self, light, released) < 0 ? -1 : 0;
}

/* Connection `local` of `worker`, as the merge found it (`connections`, keyed (worker, local)):
 * a new reference, or NULL with an exception set. */
static PyObject *
connection_of(PyObject *connections, PyObject *worker, PyObject *local)
{
    PyObject *key = PyTuple_Pack(2, worker, local);
    PyObject *connection = key == NULL ? NULL : PyObject_GetItem(connections, key);
    Py_XDECREF(key);
    return connection;
}

/* light.made: message `number` of `worker` from its nine fields, its text a Piece of the
 * worker's ring where it lies there, what `prepare` made of it put in `prepared`. */
static PyObject *
make(LightsObject *self, PyObject *number, PyObject *worker, PyObject *fields, PyObject *connections,
     PyObject *rings)
{
    if (!PyTuple_CheckExact(fields) || PyTuple_GET_SIZE(fields) != 9) {
        PyErr_SetString(PyExc_ValueError, "a light message has nine fields");
        return NULL;
    }
    PyObject *ready = PyTuple_GET_ITEM(fields, 8);
    Py_INCREF(ready);
    if (rings != Py_None) {
        PyObject *first = PySequence_GetItem(ready, 0);
        if (first == NULL) {
            Py_DECREF(ready);
            return NULL;
        }
        if (PyTuple_CheckExact(first)) { /* a place in the worker's ring */
            PyObject *ring = PyObject_GetItem(rings, worker), *piece = NULL, *call = NULL, *was = ready;
            if (ring != NULL && (call = PyTuple_New(1 + PyTuple_GET_SIZE(first))) != NULL) {
                PyTuple_SET_ITEM(call, 0, ring);
                ring = NULL;
                for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(first); i++)
                    PyTuple_SET_ITEM(call, i + 1, Py_NewRef(PyTuple_GET_ITEM(first, i)));
                piece = PyObject_Call(piece_type, call, NULL);
            }
            Py_XDECREF(ring);
            Py_XDECREF(call);
            Py_DECREF(first);
            PyObject *rest = piece == NULL ? NULL : PySequence_Tuple(was);
            Py_DECREF(was);
            ready = rest == NULL ? NULL : PyTuple_New(PyTuple_GET_SIZE(rest));
            if (ready != NULL) {
                PyTuple_SET_ITEM(ready, 0, Py_NewRef(piece));
                for (Py_ssize_t i = 1; i < PyTuple_GET_SIZE(rest); i++)
                    PyTuple_SET_ITEM(ready, i, Py_NewRef(PyTuple_GET_ITEM(rest, i)));
            }
            Py_XDECREF(piece);
            Py_XDECREF(rest);
            if (ready == NULL)
                return NULL;
        } else {
            Py_DECREF(first);
        }
    }
    int failed = PyDict_SetItem(self->prepared, number, ready);
    Py_DECREF(ready);
    if (failed)
        return NULL;
    PyObject *connection = connection_of(connections, worker, PyTuple_GET_ITEM(fields, 0));
    if (connection == NULL)
        return NULL;
    PyObject *header_notes = PyTuple_GET_ITEM(fields, 7), *notes;
    int truth = PyObject_IsTrue(header_notes);
    notes = truth < 0 ? NULL : truth ? PySequence_List(header_notes) : PyList_New(0);
    PyObject *light = notes == NULL ? NULL
        : light_of(number, connection, PyTuple_GET_ITEM(fields, 1), PyTuple_GET_ITEM(fields, 2),
                   PyTuple_GET_ITEM(fields, 3), PyTuple_GET_ITEM(fields, 4), PyTuple_GET_ITEM(fields, 5),
                   PyTuple_GET_ITEM(fields, 6), notes);
    Py_DECREF(connection);
    return light;
}

#define KEY 5   /* light.KEY: ints of an event's key */
#define ROW 15  /* light.ROW: ints of an event's row, its key's and a plain message's fields */
#define PLAIN 2 /* light.PLAIN: the kind of a plain message */

/* light.made of a plain message: message `number` of `worker` from the ten ints of its row
 * (light.plain), its text a Piece of the worker's ring. */
static PyObject *
make_plain(LightsObject *self, PyObject *number, PyObject *worker, const int64_t *row, PyObject *connections,
           PyObject *rings)
{
    enum { LOCAL, FLAGS, CORRELATION_ID, LAST_NS, SIZE, START, LENGTH, NOTES, CUT, END, FIELDS };
    PyObject *value[FIELDS] = {NULL}, *text = NULL, *ready = NULL, *connection = NULL, *notes = NULL,
             *light = NULL;
    for (int i = 0; i < FIELDS; i++)
        if (i != FLAGS && (value[i] = PyLong_FromLongLong(row[i])) == NULL)
            goto done;
    if (rings == Py_None) {
        text = PyTuple_Pack(2, value[START], value[LENGTH]);
    } else {
        PyObject *ring = PyObject_GetItem(rings, worker);
        if (ring != NULL) {
            PyObject *call[3] = {ring, value[START], value[LENGTH]};
            text = PyObject_Vectorcall(piece_type, call, 3, NULL);
            Py_DECREF(ring);
        }
    }
    if (text == NULL || (ready = PyTuple_Pack(4, text, value[NOTES], value[CUT], value[END])) == NULL
        || PyDict_SetItem(self->prepared, number, ready) < 0
        || (connection = connection_of(connections, worker, value[LOCAL])) == NULL || (notes = PyList_New(0)) == NULL)
        goto done;
    light = light_of(number, connection, row[FLAGS] & 1 ? Py_True : Py_False, value[CORRELATION_ID],
                     row[FLAGS] & 2 ? Py_True : Py_False, value[LAST_NS], value[SIZE], empty_tuple, notes);
done:
    for (int i = 0; i < FIELDS; i++)
        Py_XDECREF(value[i]);
    Py_XDECREF(text);
    Py_XDECREF(ready);
    Py_XDECREF(connection);
    return light;
}

/* An int of 64 bits: 0 and `*value` set, or -1 (no exception left) when `object` is not one. */
static int
int64_of(PyObject *object, long long *value)
{
    if (!PyLong_CheckExact(object))
        return -1;
    int overflow;
    *value = PyLong_AsLongLongAndOverflow(object, &overflow);
    if (overflow || (*value == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -1;
    }
    return 0;
}

static int
empty_tuple_of(PyObject *object)
{
    return PyTuple_CheckExact(object) && PyTuple_GET_SIZE(object) == 0;
}

/* A message's nine fields as the ten ints of its row (light.plain): 1 and `row` filled when it is
 * a plain one, 0 when it is not, -1 with an exception set when `fields` are not a message's. */
static int
plain_row(PyObject *fields, long long *row)
{
    if (!PyTuple_CheckExact(fields) || PyTuple_GET_SIZE(fields) != 9) {
        PyErr_SetString(PyExc_ValueError, "a light message has nine fields");
        return -1;
    }
    PyObject *is_request = PyTuple_GET_ITEM(fields, 1), *expects_response = PyTuple_GET_ITEM(fields, 3),
             *ready = PyTuple_GET_ITEM(fields, 8), *place;
    if (!empty_tuple_of(PyTuple_GET_ITEM(fields, 6)) || !empty_tuple_of(PyTuple_GET_ITEM(fields, 7))
        || !PyBool_Check(is_request) || !PyBool_Check(expects_response) || !PyTuple_CheckExact(ready)
        || PyTuple_GET_SIZE(ready) != 4 || !PyTuple_CheckExact(place = PyTuple_GET_ITEM(ready, 0))
        || PyTuple_GET_SIZE(place) != 2)
        return 0;
    PyObject *from[10] = {PyTuple_GET_ITEM(fields, 0), NULL, PyTuple_GET_ITEM(fields, 2), PyTuple_GET_ITEM(fields, 4),
                          PyTuple_GET_ITEM(fields, 5), PyTuple_GET_ITEM(place, 0), PyTuple_GET_ITEM(place, 1),
                          PyTuple_GET_ITEM(ready, 1), PyTuple_GET_ITEM(ready, 2), PyTuple_GET_ITEM(ready, 3)};
    row[1] = (is_request == Py_True) + 2 * (expects_response == Py_True);
    for (int i = 0; i < 10; i++)
        if (i != 1 && int64_of(from[i], &row[i]) < 0)
            return 0;
    return 1;
}

/* light.pack: an event's row appended to the bytearray `rows`. */
static PyObject *
pack(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "pack(rows, key, sequence, fields)");
        return NULL;
    }
    PyObject *rows = args[0], *key = args[1], *sequence = args[2], *fields = args[3];
    Py_ssize_t given = PyTuple_Check(key) ? PyTuple_GET_SIZE(key) : -1;
    if (!PyByteArray_Check(rows) || given != KEY - (sequence != Py_None)) {
        PyErr_SetString(PyExc_TypeError, "pack: rows are a bytearray, a key five ints or four and a sequence");
        return NULL;
    }
    long long row[ROW] = {0};
    for (Py_ssize_t i = 0; i < KEY; i++) {
        PyObject *value = i < given ? PyTuple_GET_ITEM(key, i) : sequence;
        if (!PyLong_CheckExact(value)) { /* as light.pack: ints, not bools */
            PyErr_SetString(PyExc_TypeError, "a key is of ints");
            return NULL;
        }
        row[i] = PyLong_AsLongLong(value);
        if (row[i] == -1 && PyErr_Occurred())
            return NULL; /* OverflowError: beyond 64 bits */
    }
    int found = fields == Py_None ? 0 : plain_row(fields, row + KEY);
    if (found < 0)
        return NULL;
    if (!found)
        memset(row + KEY, 0, sizeof(row) - KEY * sizeof(row[0]));
    Py_ssize_t size = PyByteArray_GET_SIZE(rows);
    if (PyByteArray_Resize(rows, size + (Py_ssize_t)sizeof(row)) < 0)
        return NULL;
    memcpy(PyByteArray_AS_STRING(rows) + size, row, sizeof(row));
    return Py_NewRef(found ? Py_True : Py_False);
}

/* The kind of event at `place` of a worker's kinds (0: a message). */
static int
kind_at(PyObject *kinds, Py_ssize_t place)
{
    if (PyBytes_CheckExact(kinds) && place >= 0 && place < PyBytes_GET_SIZE(kinds))
        return (unsigned char)PyBytes_AS_STRING(kinds)[place];
    PyObject *kind = PySequence_GetItem(kinds, place);
    if (kind == NULL)
        return -1;
    int truth = PyObject_IsTrue(kind);
    Py_DECREF(kind);
    return truth;
}

/* The Light of message `number`, the plain message at `place` of `worker`'s batch, whose
 * fields are in the batch's rows (`rows[worker]`: bytes, ROW ints an event). */
static PyObject *
plain_light(LightsObject *self, long long number, PyObject *worker, PyObject *rows, Py_ssize_t place,
            PyObject *connections, PyObject *rings)
{
    PyObject *worker_rows = PyObject_GetItem(rows, worker), *numbered = NULL, *light = NULL;
    if (worker_rows != NULL && !PyBytes_CheckExact(worker_rows))
        PyErr_SetString(PyExc_ValueError, "a batch's rows are bytes");
    else if (worker_rows != NULL && (place + 1) * ROW * (Py_ssize_t)sizeof(int64_t) > PyBytes_GET_SIZE(worker_rows))
        PyErr_SetString(PyExc_ValueError, "a plain message beyond its batch's rows");
    else if (worker_rows != NULL && (numbered = PyLong_FromLongLong(number)) != NULL) {
        int64_t row[ROW - KEY];
        memcpy(row, PyBytes_AS_STRING(worker_rows) + (place * ROW + KEY) * sizeof(int64_t), sizeof(row));
        light = make_plain(self, numbered, worker, row, connections, rings);
    }
    Py_XDECREF(numbered);
    Py_XDECREF(worker_rows);
    return light;
}

static PyObject *
lights_round(LightsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "round(number, who, at, start, items, kinds, rows, connections, rings, other)");
        return NULL;
    }
    PyObject *who = args[1], *at = args[2], *items = args[4], *kinds = args[5], *rows = args[6],
             *connections = args[7], *rings = args[8], *other = args[9];
    if (!PyList_CheckExact(who) || !PyList_CheckExact(at) || PyList_GET_SIZE(who) != PyList_GET_SIZE(at)) {
        PyErr_SetString(PyExc_ValueError, "who and at are lists of one length");
        return NULL;
    }
    long long number = PyLong_AsLongLong(args[0]);
    Py_ssize_t index = PyLong_AsSsize_t(args[3]), end = PyList_GET_SIZE(who);
    if (PyErr_Occurred())
        return NULL;
    PyObject *released = PyList_New(0);
    if (released == NULL)
        return NULL;
    for (; index < end; index++) {
        PyObject *worker = PyList_GET_ITEM(who, index);
        PyObject *worker_items = PyObject_GetItem(items, worker), *worker_kinds = NULL, *item = NULL;
        Py_ssize_t place = PyLong_AsSsize_t(PyList_GET_ITEM(at, index));
        if (worker_items != NULL && !(place == -1 && PyErr_Occurred()))
            worker_kinds = PyObject_GetItem(kinds, worker);
        if (worker_kinds != NULL)
            item = PySequence_GetItem(worker_items, place);
        int kind = item == NULL ? -1 : kind_at(worker_kinds, place);
        Py_XDECREF(worker_items);
        Py_XDECREF(worker_kinds);
        if (kind < 0) {
            Py_XDECREF(item);
            goto failed;
        }
        PyObject *light;
        if (kind == PLAIN) {
            Py_DECREF(item);
            light = plain_light(self, ++number, worker, rows, place, connections, rings);
        } else if (kind) {
            if (PyList_GET_SIZE(released)) { /* handed on first, as one process writes them first */
                Py_DECREF(item);
                break;
            }
            PyObject *head = PyTuple_Pack(1, worker);
            PyObject *rest = head == NULL ? NULL : PySequence_Tuple(item);
            PyObject *call = rest == NULL ? NULL : PySequence_Concat(head, rest);
            PyObject *result = call == NULL ? NULL : PyObject_Call(other, call, NULL);
            Py_XDECREF(head);
            Py_XDECREF(rest);
            Py_XDECREF(call);
            Py_DECREF(item);
            if (result == NULL)
                goto failed;
            Py_DECREF(result);
            continue;
        } else {
            PyObject *numbered = PyLong_FromLongLong(++number);
            light = numbered == NULL ? NULL : make(self, numbered, worker, item, connections, rings);
            Py_XDECREF(numbered);
            Py_DECREF(item);
        }
        if (light == NULL)
            goto failed;
        int failed = settle(self, (LightObject *)light, released);
        Py_DECREF(light);
        if (failed)
            goto failed;
    }
    return Py_BuildValue("(LNn)", number, released, index);
failed:
    Py_DECREF(released);
    return NULL;
}

static PyObject *
lights_made(LightsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "made(number, worker, fields, connections, rings)");
        return NULL;
    }
    return make(self, args[0], args[1], args[2], args[3], args[4]);
}

static PyObject *
lights_one(LightsObject *self, PyObject *light)
{
    LightObject *message = as_light(light);
    PyObject *released = message == NULL ? NULL : PyList_New(0);
    if (released != NULL && settle(self, message, released) < 0)
        Py_CLEAR(released);
    return released;
}

static PyObject *
lights_finish(LightsObject *self, PyObject *unused)
{
    PyObject *released = PyList_New(0);
    while (released != NULL && self->count) {
        LightObject *head = head_of(self);
        int waits = unsettled(head);
        if (waits < 0 || (waits && call_hook(unanswered, (PyObject *)head, NULL, NULL) < 0)
            || release(self, head, released) < 0) {
            Py_CLEAR(released);
            break;
        }
        drop_head(self);
    }
    return released;
}

static PyMethodDef lights_methods[] = {
    {"round", (PyCFunction)(void (*)(void))lights_round, METH_FASTCALL,
     "round(number, who, at, start, items, kinds, rows, connections, rings, other): as light.Lights.round."},
    {"made", (PyCFunction)(void (*)(void))lights_made, METH_FASTCALL,
     "made(number, worker, fields, connections, rings): as light.Lights.made."},
    {"one", (PyCFunction)lights_one, METH_O, "As light.Lights.one."},
    {"finish", (PyCFunction)lights_finish, METH_NOARGS, "As light.Lights.finish."},
    {NULL},
};

static PyMemberDef lights_members[] = {
    {"prepared", T_OBJECT_EX, offsetof(LightsObject, prepared), READONLY, NULL},
    {NULL},
};

static PyTypeObject LightsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kdissect._light_c.Lights",
    .tp_basicsize = sizeof(LightsObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Pairing and releasing in capture order of a light merge's messages (light.Lights, in C).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)lights_init,
    .tp_dealloc = (destructor)lights_dealloc,
    .tp_traverse = (traverseproc)lights_traverse,
    .tp_clear = (inquiry)lights_clear,
    .tp_methods = lights_methods,
    .tp_members = lights_members,
};

/* --- the module ------------------------------------------------------------------- */

static PyObject *
imported(const char *module, const char *name)
{
    PyObject *found = PyImport_ImportModule(module);
    if (found == NULL)
        return NULL;
    PyObject *value = PyObject_GetAttrString(found, name);
    Py_DECREF(found);
    return value;
}

/* --- write_texts ------------------------------------------------------------------- */

/* light.write_texts in C: the released messages' text, each its number then what its worker
 * made (bytes, or a spool.Piece of its ring), written with writev straight from the rings,
 * TEXT_IOV buffers at a time (spool.IOV_MAX), up to the first message that needs Python. */

#define TEXT_IOV 1024
#define NUMBER_BYTES 24

typedef struct {
    PyObject *ring;     /* a reference: the ring a piece lies in */
    Py_buffer memory;   /* the ring's memory: its header (spool.HEADER_BYTES), then its bytes */
    long long size, end; /* its size; how far the pieces given to writev reach (-1: none) */
} RingSeen;

typedef struct {
    struct iovec iov[TEXT_IOV];
    char numbers[TEXT_IOV / 2][NUMBER_BYTES];
    int count, numbers_used, rings_count;
    RingSeen rings[64];
} TextWriter;

/* `number` as spool.number_text writes it (b"%6d" % number); its length. */
static int
number_text(char *out, long long number)
{
    char digits[NUMBER_BYTES];
    int count = 0;
    unsigned long long left = number < 0 ? 0ULL - (unsigned long long)number : (unsigned long long)number;
    do {
        digits[count++] = (char)('0' + left % 10);
        left /= 10;
    } while (left);
    if (number < 0)
        digits[count++] = '-';
    int pad = count < 6 ? 6 - count : 0;
    memset(out, ' ', pad);
    for (int i = 0; i < count; i++)
        out[pad + i] = digits[count - 1 - i];
    return pad + count;
}

/* The buffers so far written whole; then each ring marked written up to its pieces' end. */
static int
text_flush(TextWriter *writer, int fd)
{
    struct iovec *iov = writer->iov;
    int count = writer->count;
    while (count > 0) {
        ssize_t sent;
        Py_BEGIN_ALLOW_THREADS
        sent = writev(fd, iov, count);
        Py_END_ALLOW_THREADS
        if (sent < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0)
                    return -1;
                continue;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        int nothing = sent == 0;
        while (count > 0 && (size_t)sent >= iov->iov_len) {
            sent -= (ssize_t)iov->iov_len;
            iov++;
            count--;
        }
        if (count > 0) {
            if (nothing) { /* no progress: said, not tried for ever */
                PyErr_SetString(PyExc_OSError, "the output took no bytes");
                return -1;
            }
            iov->iov_base = (char *)iov->iov_base + sent;
            iov->iov_len -= (size_t)sent;
        }
    }
    writer->count = writer->numbers_used = 0;
    for (int i = 0; i < writer->rings_count; i++) {
        RingSeen *seen = &writer->rings[i];
        if (seen->end >= 0)
            __atomic_store_n((int64_t *)seen->memory.buf, (int64_t)seen->end, __ATOMIC_RELEASE);
    }
    return 0;
}

/* Where `ring` is among those seen (added, its memory taken, the first time); NULL on error. */
static RingSeen *
ring_seen(TextWriter *writer, PyObject *ring)
{
    for (int i = 0; i < writer->rings_count; i++)
        if (writer->rings[i].ring == ring)
            return &writer->rings[i];
    if (writer->rings_count == (int)(sizeof(writer->rings) / sizeof(writer->rings[0]))) {
        PyErr_SetString(PyExc_ValueError, "more rings than workers");
        return NULL;
    }
    RingSeen *seen = &writer->rings[writer->rings_count];
    PyObject *memory = PyObject_GetAttr(ring, str_memory), *size = NULL;
    if (memory == NULL)
        return NULL;
    int failed = PyObject_GetBuffer(memory, &seen->memory, PyBUF_WRITABLE);
    Py_DECREF(memory);
    if (failed)
        return NULL;
    if ((size = PyObject_GetAttr(ring, str_size)) == NULL || (seen->size = PyLong_AsLongLong(size)) < 0
        || seen->size + header_bytes > seen->memory.len || ((uintptr_t)seen->memory.buf & 7)) {
        Py_XDECREF(size);
        PyBuffer_Release(&seen->memory);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a ring larger than its memory");
        return NULL;
    }
    Py_DECREF(size);
    seen->ring = Py_NewRef(ring);
    seen->end = -1;
    writer->rings_count++;
    return seen;
}

/* A piece's bytes in its ring (`base`, `length`); 0, or -1 on error. */
static int
piece_bytes(TextWriter *writer, PyObject *piece, const char **base, Py_ssize_t *length)
{
    PyObject *ring = PyObject_GetAttr(piece, str_ring), *start = NULL, *size = NULL;
    RingSeen *seen = ring == NULL ? NULL : ring_seen(writer, ring);
    Py_XDECREF(ring);
    if (seen == NULL || (start = PyObject_GetAttr(piece, str_start)) == NULL
        || (size = PyObject_GetAttr(piece, str_length)) == NULL) {
        Py_XDECREF(start);
        return -1;
    }
    long long from = PyLong_AsLongLong(start), count = PyLong_AsLongLong(size);
    Py_DECREF(start);
    Py_DECREF(size);
    if (PyErr_Occurred())
        return -1;
    long long at = from % seen->size;
    if (from < 0 || count < 0 || at + count > seen->size) {
        PyErr_SetString(PyExc_ValueError, "a piece beyond its ring");
        return -1;
    }
    *base = (const char *)seen->memory.buf + header_bytes + at;
    *length = (Py_ssize_t)count;
    seen->end = from + count;
    return 0;
}

/* Whether message `message` (a Light, or any object with `notes` and `number`) with
 * `prepared` is written here: 1 with its number, 0 if Python writes it, -1 on error. */
static int
written_here(PyObject *message, PyObject *prepared, long long *number)
{
    if (!PyTuple_CheckExact(prepared) || PyTuple_GET_SIZE(prepared) != 4)
        return 0;
    PyObject *tail = PyTuple_GET_ITEM(prepared, 0), *wanted = PyTuple_GET_ITEM(prepared, 1);
    if (!(PyBytes_CheckExact(tail) || Py_IS_TYPE(tail, (PyTypeObject *)piece_type)) || !PyLong_CheckExact(wanted))
        return 0;
    PyObject *notes, *value;
    if (Py_IS_TYPE(message, &LightType)) {
        notes = Py_NewRef(((LightObject *)message)->notes);
        value = Py_NewRef(((LightObject *)message)->number);
    } else {
        if ((notes = PyObject_GetAttr(message, str_notes)) == NULL)
            return -1;
        if ((value = PyObject_GetAttr(message, str_number)) == NULL) {
            Py_DECREF(notes);
            return -1;
        }
    }
    Py_ssize_t have = PyObject_Size(notes);
    Py_DECREF(notes);
    int overflow = 0;
    long long count = PyLong_AsLongLongAndOverflow(wanted, &overflow);
    *number = PyLong_Check(value) ? PyLong_AsLongLongAndOverflow(value, &overflow) : (overflow = 1, 0);
    Py_DECREF(value);
    if (have < 0 || PyErr_Occurred())
        return -1;
    return !overflow && count == (long long)have;
}

static PyObject *
write_texts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "write_texts(fd, released: list, start)");
        return NULL;
    }
    long fd = PyLong_AsLong(args[0]);
    Py_ssize_t index = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred())
        return NULL;
    if (fd < 0 || fd > INT_MAX || index < 0) {
        PyErr_SetString(PyExc_ValueError, "a file descriptor and a start of 0 or more");
        return NULL;
    }
    TextWriter *writer = PyMem_Calloc(1, sizeof(TextWriter));
    if (writer == NULL)
        return PyErr_NoMemory();
    PyObject *released = args[1];
    int failed = 0;
    for (; index < PyList_GET_SIZE(released); index++) {
        PyObject *item = PyList_GET_ITEM(released, index);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2)
            break;
        PyObject *prepared = PyTuple_GET_ITEM(item, 1);
        long long number;
        int here = written_here(PyTuple_GET_ITEM(item, 0), prepared, &number);
        if (here <= 0) {
            failed = here < 0;
            break;
        }
        if (writer->count + 2 > TEXT_IOV && text_flush(writer, (int)fd) < 0) {
            failed = 1;
            break;
        }
        PyObject *tail = PyTuple_GET_ITEM(prepared, 0);
        const char *base;
        Py_ssize_t length;
        if (PyBytes_CheckExact(tail)) {
            base = PyBytes_AS_STRING(tail);
            length = PyBytes_GET_SIZE(tail);
        } else if (piece_bytes(writer, tail, &base, &length) < 0) {
            failed = 1;
            break;
        }
        char *text = writer->numbers[writer->numbers_used++];
        writer->iov[writer->count].iov_base = text;
        writer->iov[writer->count++].iov_len = (size_t)number_text(text, number);
        writer->iov[writer->count].iov_base = (void *)base;
        writer->iov[writer->count++].iov_len = (size_t)length;
    }
    if (!failed && writer->count)
        failed = text_flush(writer, (int)fd) < 0;
    for (int i = 0; i < writer->rings_count; i++) {
        PyBuffer_Release(&writer->rings[i].memory);
        Py_DECREF(writer->rings[i].ring);
    }
    PyMem_Free(writer);
    return failed ? NULL : PyLong_FromSsize_t(index);
}

static PyMethodDef module_methods[] = {
    {"write_texts", (PyCFunction)(void (*)(void))write_texts, METH_FASTCALL,
     "write_texts(fd, released, start): light.write_texts, in C"},
    {"pack", (PyCFunction)(void (*)(void))pack, METH_FASTCALL, "pack(rows, key, sequence, fields): light.pack, in C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kdissect._light_c",
    "The parent's side of a light merge of `kdissect.light` in C (optional).", -1, module_methods,
};

PyMODINIT_FUNC
PyInit__light_c(void)
{
    const char *pairing = "kdissect.pair.pairing";
    PyObject *header;
    if ((empty_tuple = PyTuple_New(0)) == NULL || (piece_type = imported("kdissect.spool", "Piece")) == NULL
        || (ordered_dict = imported("collections", "OrderedDict")) == NULL
        || (duplicate = imported(pairing, "_duplicate")) == NULL || (missing = imported(pairing, "_missing")) == NULL
        || (out_of_order = imported(pairing, "_out_of_order")) == NULL
        || (overdue = imported(pairing, "_overdue")) == NULL || (unanswered = imported(pairing, "_unanswered")) == NULL
        || (default_hold_seconds = imported(pairing, "HOLD_SECONDS")) == NULL
        || (default_hold_messages = imported(pairing, "HOLD_MESSAGES")) == NULL
        || (default_hold_bytes = imported(pairing, "HOLD_BYTES")) == NULL
        || (str_index = PyUnicode_InternFromString("index")) == NULL
        || (str_popitem = PyUnicode_InternFromString("popitem")) == NULL
        || (str_memory = PyUnicode_InternFromString("memory")) == NULL
        || (str_size = PyUnicode_InternFromString("size")) == NULL
        || (str_ring = PyUnicode_InternFromString("ring")) == NULL
        || (str_start = PyUnicode_InternFromString("start")) == NULL
        || (str_length = PyUnicode_InternFromString("length")) == NULL
        || (str_notes = PyUnicode_InternFromString("notes")) == NULL
        || (str_number = PyUnicode_InternFromString("number")) == NULL
        || (header = imported("kdissect.spool", "HEADER_BYTES")) == NULL)
        return NULL;
    header_bytes = PyLong_AsLongLong(header);
    Py_DECREF(header);
    pairer_hold = PyLong_AsSsize_t(default_hold_messages);
    if (PyErr_Occurred() || PyType_Ready(&LightType) < 0 || PyType_Ready(&LightsType) < 0)
        return NULL;
    if (PyDict_SetItemString(LightsType.tp_dict, "light", (PyObject *)&LightType) < 0)
        return NULL;
    PyObject *created = PyModule_Create(&module);
    if (created == NULL)
        return NULL;
    if (PyModule_AddObjectRef(created, "Light", (PyObject *)&LightType) < 0
        || PyModule_AddObjectRef(created, "Lights", (PyObject *)&LightsType) < 0) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
