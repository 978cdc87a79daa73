/* odradek.client._record_buffer: the producer's per-batch record buffer and lock-free tail append,
 * in C. The pure-Python twin is client/record_buffer.py; both have the same behaviour and
 * are tested side by side (tests/client/test_record_buffer.py).
 *
 * RecordBuffer holds the *records section* of one RecordBatch v2 (what follows the 61-byte
 * batch header), encoded as each record is appended. A record is:
 *
 *     length          varint   bytes after this field
 *     attributes      int8     0
 *     timestampDelta  varlong  timestamp - first record's timestamp
 *     offsetDelta     varint   index of the record in the batch
 *     keyLength       varint   -1 for a null key
 *     key             bytes
 *     valueLength     varint   -1 for a null value
 *     value           bytes
 *     headersCount    varint
 *       headerKeyLength varint, headerKey (UTF-8), headerValueLength varint (-1 null), value
 *
 * Varints are zig-zag LEB128 (Kafka's ByteUtils.writeVarint/writeVarlong). Besides the bytes,
 * the buffer keeps, per record, its timestamp and key and value sizes (RecordMetadata needs
 * them: metadata(index)), the first and the largest timestamp (batch header fields) and `size_bytes`, the *estimated*
 * size the producer checks against batch_size and buffer_memory: per record
 * RECORD_OVERHEAD_BYTES + key + value + for each header (4 * len(key) + value + 10), the same
 * formula as client.record_buffer.record_size.
 *
 * body() hands the bytes out without a copy (a read-only memoryview: RecordBuffer exports the
 * buffer protocol); while any view is alive, appends raise BufferError, so the bytes never
 * move under a view (a closed batch is only ever sent, never appended to).
 *
 * TailAppender.append(topic, value) is Producer.send()'s hot path for a null-key record
 * without headers: it appends the record, stamped with the wall clock in ms, to the topic's
 * tail batch in the `tails` dict (a thread that removed the tail from the dict owns it: see
 * client/accumulator.py; here the GIL makes the append atomic) and returns
 * RecordFuture(batch, index) — or None when there is no tail in the dict, the tail is full,
 * the value is not bytes or the appender is closed; the caller then takes the locked path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define RECORD_OVERHEAD_BYTES 36
#define MAX_VARINT_BYTES 10

/* -- varints ------------------------------------------------------------------------------ */

static inline int
varint_size(int64_t value)
{
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline char *
write_varint(char *out, int64_t value)
{
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    while (v >= 0x80) {
        *out++ = (char)(v | 0x80);
        v >>= 7;
    }
    *out++ = (char)v;
    return out;
}

/* -- RecordBuffer ------------------------------------------------------------------------- */

typedef struct {
    int64_t timestamp_ms;
    int32_t key_size, value_size; /* -1: null */
} RecordMeta;

typedef struct {
    PyObject_HEAD
    char *data;             /* the encoded records */
    Py_ssize_t length;      /* bytes of data in use */
    Py_ssize_t capacity;    /* bytes allocated */
    RecordMeta *meta;       /* per record: what RecordMetadata needs */
    Py_ssize_t count;       /* records */
    Py_ssize_t meta_capacity; /* records the meta array holds */
    int64_t first_timestamp_ms;
    int64_t max_timestamp_ms;
    Py_ssize_t size_bytes;  /* the producer's estimate (see the top of the file) */
    Py_ssize_t exports;     /* live buffer views of data (body()): appends are refused */
} RecordBuffer;

static PyTypeObject RecordBuffer_Type;

static PyObject *
RecordBuffer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "RecordBuffer() takes no arguments");
        return NULL;
    }
    RecordBuffer *self = (RecordBuffer *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->first_timestamp_ms = -1;
    self->max_timestamp_ms = -1;
    return (PyObject *)self;
}

static void
RecordBuffer_dealloc(RecordBuffer *self)
{
    PyMem_Free(self->data);
    PyMem_Free(self->meta);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Room for `more` bytes and one more record; -1 with MemoryError set when out of memory, or
 * BufferError while a view of the bytes is alive (a realloc would move them under it). */
static int
reserve(RecordBuffer *self, Py_ssize_t more)
{
    if (self->exports > 0) {
        PyErr_SetString(PyExc_BufferError, "the records are being sent: no more appends");
        return -1;
    }
    if (self->length + more > self->capacity) {
        Py_ssize_t want = self->capacity ? self->capacity : 4096;
        while (want < self->length + more) {
            if (want > PY_SSIZE_T_MAX / 2) {
                PyErr_NoMemory();
                return -1;
            }
            want *= 2;
        }
        char *data = PyMem_Realloc(self->data, (size_t)want);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->data = data;
        self->capacity = want;
    }
    if (self->count == self->meta_capacity) {
        Py_ssize_t want = self->meta_capacity ? self->meta_capacity * 2 : 256;
        RecordMeta *meta = PyMem_Realloc(self->meta, (size_t)want * sizeof(RecordMeta));
        if (meta == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->meta = meta;
        self->meta_capacity = want;
    }
    return 0;
}

/* A key or value argument: bytes or None. Sets data and size (size -1 for None). */
static int
field(PyObject *obj, const char *what, const char **data, Py_ssize_t *size)
{
    if (obj == Py_None) {
        *data = NULL;
        *size = -1;
        return 0;
    }
    if (!PyBytes_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "record %s must be bytes or None, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *size = PyBytes_GET_SIZE(obj);
    if (*size > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "record %s of %zd bytes is over 2 GiB", what, *size);
        return -1;
    }
    *data = PyBytes_AS_STRING(obj);
    return 0;
}

/* Header i of `headers` (a list or tuple, from PySequence_Fast) as its key and value, or -1
 * with TypeError when it is not a (key, value) tuple or list. */
static int
header_at(PyObject *headers, Py_ssize_t i, PyObject **key, PyObject **value)
{
    PyObject *pair = PySequence_Fast_GET_ITEM(headers, i);
    if (!(PyTuple_Check(pair) || PyList_Check(pair)) || PySequence_Fast_GET_SIZE(pair) != 2) {
        PyErr_SetString(PyExc_TypeError, "a header must be a (str, bytes | None) tuple");
        return -1;
    }
    *key = PySequence_Fast_GET_ITEM(pair, 0);
    *value = PySequence_Fast_GET_ITEM(pair, 1);
    return 0;
}

/* The encoded size of `headers` (a list or tuple of (str, bytes | None)), with their count,
 * and the producer's estimate of it; -1 with an exception set for a malformed one. */
static Py_ssize_t
headers_size(PyObject *headers, Py_ssize_t *estimate)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(headers);
    Py_ssize_t total = varint_size(n);
    *estimate = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key, *header_value;
        if (header_at(headers, i, &key, &header_value) < 0) {
            return -1;
        }
        if (!PyUnicode_Check(key)) {
            PyErr_Format(PyExc_TypeError, "header key must be str, not %.100s",
                         Py_TYPE(key)->tp_name);
            return -1;
        }
        Py_ssize_t key_bytes;
        if (PyUnicode_AsUTF8AndSize(key, &key_bytes) == NULL) {
            return -1;
        }
        const char *value;
        Py_ssize_t value_size;
        if (field(header_value, "header value", &value, &value_size) < 0) {
            return -1;
        }
        total += varint_size(key_bytes) + key_bytes + varint_size(value_size);
        total += value_size > 0 ? value_size : 0;
        *estimate += 4 * PyUnicode_GET_LENGTH(key) + (value_size > 0 ? value_size : 0) + 10;
    }
    return total;
}

static char *
write_headers(char *out, PyObject *headers)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(headers);
    out = write_varint(out, n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key_obj, *value; /* checked by headers_size() */
        header_at(headers, i, &key_obj, &value);
        Py_ssize_t key_bytes;
        const char *key = PyUnicode_AsUTF8AndSize(key_obj, &key_bytes);
        out = write_varint(out, key_bytes);
        memcpy(out, key, (size_t)key_bytes);
        out += key_bytes;
        if (value == Py_None) {
            out = write_varint(out, -1);
        } else {
            Py_ssize_t size = PyBytes_GET_SIZE(value);
            out = write_varint(out, size);
            memcpy(out, PyBytes_AS_STRING(value), (size_t)size);
            out += size;
        }
    }
    return out;
}

/* Append one record; its index, or -1 with an exception set (the buffer is unchanged). */
static Py_ssize_t
append_record(RecordBuffer *self, const char *key, Py_ssize_t key_size, const char *value,
              Py_ssize_t value_size, int64_t timestamp_ms, PyObject *headers)
{
    Py_ssize_t headers_bytes = 1, headers_estimate = 0;  /* no headers: a 0 count */
    if (headers != NULL && (headers_bytes = headers_size(headers, &headers_estimate)) < 0) {
        return -1;
    }
    if (self->count >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a batch holds at most 2**31 - 1 records");
        return -1;
    }
    int64_t first = self->count ? self->first_timestamp_ms : timestamp_ms;
    int64_t delta = timestamp_ms - first;
    Py_ssize_t body = 1 + varint_size(delta) + varint_size(self->count) + varint_size(key_size)
                      + (key_size > 0 ? key_size : 0) + varint_size(value_size)
                      + (value_size > 0 ? value_size : 0) + headers_bytes;
    if (body > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a record is at most 2 GiB");
        return -1;
    }
    if (reserve(self, MAX_VARINT_BYTES + body) < 0) {
        return -1;
    }
    char *out = write_varint(self->data + self->length, body);
    *out++ = 0; /* attributes */
    out = write_varint(out, delta);
    out = write_varint(out, self->count);
    out = write_varint(out, key_size);
    if (key_size > 0) {
        memcpy(out, key, (size_t)key_size);
        out += key_size;
    }
    out = write_varint(out, value_size);
    if (value_size > 0) {
        memcpy(out, value, (size_t)value_size);
        out += value_size;
    }
    if (headers != NULL) {
        out = write_headers(out, headers);
    } else {
        *out++ = 0;
    }
    self->length = out - self->data;
    Py_ssize_t index = self->count++;
    self->meta[index] = (RecordMeta){timestamp_ms, (int32_t)key_size, (int32_t)value_size};
    if (index == 0) {
        self->first_timestamp_ms = self->max_timestamp_ms = timestamp_ms;
    } else if (timestamp_ms > self->max_timestamp_ms) {
        self->max_timestamp_ms = timestamp_ms;
    }
    self->size_bytes += RECORD_OVERHEAD_BYTES + (key_size > 0 ? key_size : 0)
                        + (value_size > 0 ? value_size : 0) + headers_estimate;
    return index;
}

/* -- extend: many records from Arrow-layout columns --------------------------------------- */

/* One binary/string column in Arrow's layout: int32 offsets (element i spans
 * offsets[first + i] .. offsets[first + i + 1] of data), an optional validity bitmap (LSB
 * first, bit first + i; 0 = null) and `first`, the array's offset into its buffers. */
typedef struct {
    Py_buffer offsets, data, validity;
    int present, has_validity;
    Py_ssize_t first;
} Column;

static void
column_release(Column *c)
{
    if (c->present) {
        PyBuffer_Release(&c->offsets);
        PyBuffer_Release(&c->data);
        if (c->has_validity)
            PyBuffer_Release(&c->validity);
    }
    c->present = 0;
}

/* `obj`: None (every element null) or (offsets, data, validity or None, first). */
static int
column_arg(PyObject *obj, Column *c, const char *what)
{
    memset(c, 0, sizeof(*c));
    if (obj == Py_None)
        return 0;
    PyObject *offsets, *data, *validity;
    if (!PyArg_ParseTuple(obj, "OOOn", &offsets, &data, &validity, &c->first)) {
        PyErr_Format(PyExc_TypeError, "%s: expected (offsets, data, validity, first) or None",
                     what);
        return -1;
    }
    if (PyObject_GetBuffer(offsets, &c->offsets, PyBUF_SIMPLE) < 0)
        return -1;
    if (PyObject_GetBuffer(data, &c->data, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&c->offsets);
        return -1;
    }
    c->present = 1;
    if (validity != Py_None) {
        if (PyObject_GetBuffer(validity, &c->validity, PyBUF_SIMPLE) < 0) {
            c->present = 0;
            PyBuffer_Release(&c->offsets);
            PyBuffer_Release(&c->data);
            return -1;
        }
        c->has_validity = 1;
    }
    return 0;
}

/* Element `row` of the column: data and size (-1 for null); -1 with ValueError when the
 * buffers do not hold it. */
static int
column_cell(const Column *c, int64_t row, const char **data, Py_ssize_t *size)
{
    *data = NULL;
    *size = -1;
    if (!c->present)
        return 0;
    int64_t i = row + c->first;
    if (row < 0 || (i + 2) * 4 > c->offsets.len) {
        PyErr_Format(PyExc_ValueError, "row %lld is outside the column", (long long)row);
        return -1;
    }
    if (c->has_validity) {
        if (i / 8 >= c->validity.len) {
            PyErr_SetString(PyExc_ValueError, "validity bitmap too short");
            return -1;
        }
        if (!((((const uint8_t *)c->validity.buf)[i / 8] >> (i % 8)) & 1))
            return 0;
    }
    int32_t from, to;
    memcpy(&from, (const char *)c->offsets.buf + i * 4, 4);
    memcpy(&to, (const char *)c->offsets.buf + (i + 1) * 4, 4);
    if (from < 0 || to < from || to > c->data.len) {
        PyErr_SetString(PyExc_ValueError, "column offsets outside the data buffer");
        return -1;
    }
    *data = (const char *)c->data.buf + from;
    *size = to - from;
    return 0;
}

PyDoc_STRVAR(extend_doc,
"extend(values, keys, rows, start, timestamp_ms, limit_bytes) -> int\n\n"
"Append the records rows[start], rows[start + 1], ... (rows: a buffer of int64 row numbers)\n"
"whose value and key are those rows of `values` and `keys`: each None (all null) or an\n"
"Arrow binary/string column as (offsets, data, validity or None, array offset). Stops before\n"
"the record that would take size_bytes past limit_bytes (a buffer that is empty takes one\n"
"anyway); no headers, every record stamped timestamp_ms. Returns where it stopped.");

static PyObject *
RecordBuffer_extend(RecordBuffer *self, PyObject *args)
{
    PyObject *values_obj, *keys_obj, *rows_obj;
    Py_ssize_t start, limit_bytes;
    long long timestamp_ms;
    if (!PyArg_ParseTuple(args, "OOOnLn:extend", &values_obj, &keys_obj, &rows_obj, &start,
                          &timestamp_ms, &limit_bytes))
        return NULL;
    Column values, keys;
    Py_buffer rows;
    if (column_arg(values_obj, &values, "values") < 0)
        return NULL;
    if (column_arg(keys_obj, &keys, "keys") < 0) {
        column_release(&values);
        return NULL;
    }
    if (PyObject_GetBuffer(rows_obj, &rows, PyBUF_SIMPLE) < 0) {
        column_release(&values);
        column_release(&keys);
        return NULL;
    }
    Py_ssize_t n = rows.len / 8;
    PyObject *result = NULL;
    if (start < 0)
        start = 0;
    for (; start < n; start++) {
        int64_t row;
        memcpy(&row, (const char *)rows.buf + start * 8, 8);
        const char *value, *key;
        Py_ssize_t value_size, key_size;
        if (column_cell(&values, row, &value, &value_size) < 0
            || column_cell(&keys, row, &key, &key_size) < 0)
            goto done;
        Py_ssize_t size = RECORD_OVERHEAD_BYTES + (key_size > 0 ? key_size : 0)
                          + (value_size > 0 ? value_size : 0);
        if (self->count > 0 && self->size_bytes + size > limit_bytes)
            break;
        if (append_record(self, key, key_size, value, value_size, timestamp_ms, NULL) < 0)
            goto done;
    }
    result = PyLong_FromSsize_t(start);
done:
    PyBuffer_Release(&rows);
    column_release(&values);
    column_release(&keys);
    return result;
}

PyDoc_STRVAR(append_doc,
"append(value, key, timestamp_ms, headers) -> int\n\n"
"Encode one record at the end; returns its index (offset delta). value and key are bytes\n"
"or None, headers a sequence of (str, bytes | None) or None.");

static PyObject *
RecordBuffer_append(RecordBuffer *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "append() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    const char *value, *key;
    Py_ssize_t value_size, key_size;
    if (field(args[0], "value", &value, &value_size) < 0
        || field(args[1], "key", &key, &key_size) < 0) {
        return NULL;
    }
    long long timestamp_ms = PyLong_AsLongLong(args[2]);
    if (timestamp_ms == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *headers = NULL; /* a list or tuple, or NULL for none */
    if (args[3] != Py_None) {
        headers = PySequence_Fast(args[3], "headers must be a sequence of (str, bytes) or None");
        if (headers == NULL) {
            return NULL;
        }
        if (PySequence_Fast_GET_SIZE(headers) == 0) {
            Py_CLEAR(headers);
        }
    }
    Py_ssize_t index =
        append_record(self, key, key_size, value, value_size, timestamp_ms, headers);
    Py_XDECREF(headers);
    return index < 0 ? NULL : PyLong_FromSsize_t(index);
}

PyDoc_STRVAR(body_doc,
"body() -> memoryview\n\n"
"The encoded records (a RecordBatch v2 records section): a read-only view, no copy. While a\n"
"view is alive, appends raise BufferError (as a bytearray's resizes do).");

static PyObject *
RecordBuffer_body(RecordBuffer *self, PyObject *Py_UNUSED(ignored))
{
    return PyMemoryView_FromObject((PyObject *)self);
}

static int
RecordBuffer_getbuffer(RecordBuffer *self, Py_buffer *view, int flags)
{
    static char empty[1];
    if (PyBuffer_FillInfo(view, (PyObject *)self, self->data ? self->data : empty,
                          self->length, 1, flags) < 0) {
        return -1;
    }
    self->exports++;
    return 0;
}

static void
RecordBuffer_releasebuffer(RecordBuffer *self, Py_buffer *Py_UNUSED(view))
{
    self->exports--;
}

static PyBufferProcs RecordBuffer_as_buffer = {
    .bf_getbuffer = (getbufferproc)RecordBuffer_getbuffer,
    .bf_releasebuffer = (releasebufferproc)RecordBuffer_releasebuffer,
};

PyDoc_STRVAR(metadata_doc,
"metadata(index) -> (timestamp_ms, key_size, value_size)\n\n"
"Record index's timestamp, and key and value sizes (-1 for a null key or value).");

static PyObject *
RecordBuffer_metadata(RecordBuffer *self, PyObject *arg)
{
    Py_ssize_t index = PyLong_AsSsize_t(arg);
    if (index == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (index < 0) {
        index += self->count;
    }
    if (index < 0 || index >= self->count) {
        PyErr_SetString(PyExc_IndexError, "record index out of range");
        return NULL;
    }
    const RecordMeta *meta = &self->meta[index];
    return Py_BuildValue("(Lii)", (long long)meta->timestamp_ms, meta->key_size, meta->value_size);
}

static Py_ssize_t
RecordBuffer_len(RecordBuffer *self)
{
    return self->count;
}

static PyObject *
RecordBuffer_get_size_bytes(RecordBuffer *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->size_bytes);
}

static PyObject *
RecordBuffer_get_first_timestamp_ms(RecordBuffer *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->first_timestamp_ms);
}

static PyObject *
RecordBuffer_get_max_timestamp_ms(RecordBuffer *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->max_timestamp_ms);
}

static PyMethodDef RecordBuffer_methods[] = {
    {"append", (PyCFunction)(void (*)(void))RecordBuffer_append, METH_FASTCALL, append_doc},
    {"body", (PyCFunction)RecordBuffer_body, METH_NOARGS, body_doc},
    {"metadata", (PyCFunction)RecordBuffer_metadata, METH_O, metadata_doc},
    {"extend", (PyCFunction)RecordBuffer_extend, METH_VARARGS, extend_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef RecordBuffer_getset[] = {
    {"size_bytes", (getter)RecordBuffer_get_size_bytes, NULL,
     "estimated bytes of the records (checked against batch_size and buffer_memory)", NULL},
    {"first_timestamp_ms", (getter)RecordBuffer_get_first_timestamp_ms, NULL,
     "the first record's timestamp (-1 while empty)", NULL},
    {"max_timestamp_ms", (getter)RecordBuffer_get_max_timestamp_ms, NULL,
     "the largest timestamp (-1 while empty)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods RecordBuffer_as_sequence = {
    .sq_length = (lenfunc)RecordBuffer_len,
};

static PyTypeObject RecordBuffer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.client._record_buffer.RecordBuffer",
    .tp_doc = PyDoc_STR("The records of one RecordBatch v2, encoded as they are appended."),
    .tp_basicsize = sizeof(RecordBuffer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = RecordBuffer_new,
    .tp_dealloc = (destructor)RecordBuffer_dealloc,
    .tp_methods = RecordBuffer_methods,
    .tp_getset = RecordBuffer_getset,
    .tp_as_sequence = &RecordBuffer_as_sequence,
    .tp_as_buffer = &RecordBuffer_as_buffer,
};

/* -- TailAppender ------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *tails;        /* dict: topic -> Batch (a Python object with a `records` slot) */
    PyTypeObject *future_type; /* RecordFuture: created without __init__, like object.__new__ */
    Py_ssize_t batch_offset; /* where its `_batch` and `_index` slots live in the object */
    Py_ssize_t index_offset;
    Py_ssize_t limit_bytes; /* a batch's size_bytes may not pass this */
    PyObject *last_batch;   /* the batch appended to last, and its `records` (strong refs: */
    PyObject *last_records; /* a batch's records never change, so the lookup is done once) */
    char closed;
} TailAppender;

static PyObject *str_records, *str_batch, *str_index; /* interned attribute names */

/* The offset of `type`'s __slots__ member `name` (an object slot), or -1 with TypeError. */
static Py_ssize_t
slot_offset(PyTypeObject *type, PyObject *name)
{
    PyObject *descr = PyObject_GetAttr((PyObject *)type, name);
    if (descr == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear();
    }
    Py_ssize_t offset = -1;
    if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type)
        && ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX) {
        offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    } else {
        PyErr_Format(PyExc_TypeError, "%.100s.%U must be a __slots__ member", type->tp_name,
                     name);
    }
    Py_XDECREF(descr);
    return offset;
}

static int
TailAppender_init(TailAppender *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"tails", "limit_bytes", "future_type", NULL};
    PyObject *tails, *future_type;
    Py_ssize_t limit_bytes;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!nO!:TailAppender", keywords,
                                     &PyDict_Type, &tails, &limit_bytes, &PyType_Type,
                                     &future_type)) {
        return -1;
    }
    self->batch_offset = slot_offset((PyTypeObject *)future_type, str_batch);
    self->index_offset = slot_offset((PyTypeObject *)future_type, str_index);
    if (self->batch_offset < 0 || self->index_offset < 0) {
        return -1;
    }
    Py_INCREF(tails);
    Py_XSETREF(self->tails, tails);
    Py_INCREF(future_type);
    Py_XSETREF(self->future_type, (PyTypeObject *)future_type);
    self->limit_bytes = limit_bytes;
    self->closed = 0;
    return 0;
}

static int
TailAppender_traverse(TailAppender *self, visitproc visit, void *arg)
{
    Py_VISIT(self->tails);
    Py_VISIT(self->future_type);
    Py_VISIT(self->last_batch);
    Py_VISIT(self->last_records);
    return 0;
}

static int
TailAppender_clear(TailAppender *self)
{
    Py_CLEAR(self->tails);
    Py_CLEAR(self->future_type);
    Py_CLEAR(self->last_batch);
    Py_CLEAR(self->last_records);
    return 0;
}

static void
TailAppender_dealloc(TailAppender *self)
{
    PyObject_GC_UnTrack(self);
    TailAppender_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int64_t
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

PyDoc_STRVAR(tail_append_doc,
"append(topic, value) -> RecordFuture | None\n\n"
"Append a null-key record without headers, stamped now, to the topic's tail batch; None\n"
"when there is no tail to take, it is full, value is not bytes, or the appender is closed.");

static PyObject *
TailAppender_append(TailAppender *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "append() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *topic = args[0], *value = args[1];
    if (self->closed || !PyBytes_CheckExact(value) || !PyUnicode_CheckExact(topic)) {
        Py_RETURN_NONE;
    }
    /* The future first: allocating a GC-tracked object may run a collection, hence Python
     * code (finalizers) that may let another thread run. From the dict lookup to the return
     * nothing below runs Python code or releases the GIL (a str-keyed lookup, a slot read,
     * PyMem and int allocations), so the tail stays where it is and no other thread can touch
     * it meanwhile: the append is atomic, as the pure twin's pop-and-put-back makes it. */
    PyObject *future = self->future_type->tp_alloc(self->future_type, 0);
    if (future == NULL) {
        return NULL;
    }
    PyObject *batch = PyDict_GetItemWithError(self->tails, topic); /* borrowed */
    if (batch == NULL) {
        Py_DECREF(future);
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE; /* no tail, or another thread holds it */
    }
    int cached = batch == self->last_batch;
    PyObject *records = cached ? Py_NewRef(self->last_records) : PyObject_GetAttr(batch, str_records);
    if (records == NULL) {
        Py_DECREF(future);
        return NULL;
    }
    if (!PyObject_TypeCheck(records, &RecordBuffer_Type)) {
        PyErr_SetString(PyExc_TypeError, "the tail batch's records are not a RecordBuffer");
        goto fail;
    }
    RecordBuffer *buffer = (RecordBuffer *)records;
    Py_ssize_t size = PyBytes_GET_SIZE(value);
    if (buffer->size_bytes + size + RECORD_OVERHEAD_BYTES > self->limit_bytes) {
        Py_DECREF(records);
        Py_DECREF(future);
        Py_RETURN_NONE; /* full: the locked path closes it */
    }
    PyObject *index = PyLong_FromSsize_t(buffer->count);
    if (index == NULL
        || append_record(buffer, NULL, -1, PyBytes_AS_STRING(value), size, now_ms(), NULL) < 0) {
        Py_XDECREF(index);
        goto fail;
    }
    /* the fresh object's slots are NULL: store the new references directly */
    *(PyObject **)((char *)future + self->batch_offset) = Py_NewRef(batch);
    *(PyObject **)((char *)future + self->index_offset) = index;
    if (!cached) {
        /* remember this batch; the previous one is let go last, once the append is whole
         * (its release may run finalizers, hence Python code and other threads) */
        PyObject *old_batch = self->last_batch, *old_records = self->last_records;
        self->last_batch = Py_NewRef(batch);
        self->last_records = records; /* takes our reference */
        Py_XDECREF(old_batch);
        Py_XDECREF(old_records);
        return future;
    }
    Py_DECREF(records);
    return future;
fail:
    Py_DECREF(records);
    Py_DECREF(future);
    return NULL;
}

static PyObject *
TailAppender_get_closed(TailAppender *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->closed);
}

static int
TailAppender_set_closed(TailAppender *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete closed");
        return -1;
    }
    int truth = PyObject_IsTrue(value);
    if (truth < 0) {
        return -1;
    }
    self->closed = (char)truth;
    return 0;
}

static PyMethodDef TailAppender_methods[] = {
    {"append", (PyCFunction)(void (*)(void))TailAppender_append, METH_FASTCALL,
     tail_append_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef TailAppender_getset[] = {
    {"closed", (getter)TailAppender_get_closed, (setter)TailAppender_set_closed,
     "when true, append() returns None (the producer is closing)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TailAppender_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.client._record_buffer.TailAppender",
    .tp_doc = PyDoc_STR("TailAppender(tails, limit_bytes, future_type): "
                        "Producer.send()'s hot path."),
    .tp_basicsize = sizeof(TailAppender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)TailAppender_init,
    .tp_dealloc = (destructor)TailAppender_dealloc,
    .tp_traverse = (traverseproc)TailAppender_traverse,
    .tp_clear = (inquiry)TailAppender_clear,
    .tp_methods = TailAppender_methods,
    .tp_getset = TailAppender_getset,
};

/* -- module ------------------------------------------------------------------------------- */

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "odradek.client._record_buffer",
    .m_doc = "The producer's record buffer and tail append in C (see client/record_buffer.py).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__record_buffer(void)
{
    if (str_records == NULL) {
        str_records = PyUnicode_InternFromString("records");
        str_batch = PyUnicode_InternFromString("_batch");
        str_index = PyUnicode_InternFromString("_index");
        if (str_records == NULL || str_batch == NULL || str_index == NULL) {
            return NULL;
        }
    }
    if (PyType_Ready(&RecordBuffer_Type) < 0 || PyType_Ready(&TailAppender_Type) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "RecordBuffer", (PyObject *)&RecordBuffer_Type) < 0
        || PyModule_AddObjectRef(m, "TailAppender", (PyObject *)&TailAppender_Type) < 0
        || PyModule_AddIntConstant(m, "RECORD_OVERHEAD_BYTES", RECORD_OVERHEAD_BYTES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
