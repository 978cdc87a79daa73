/* odradek.spark._arrow_records: RecordBatch v2 record sections -> Arrow column buffers, in C.
 * The pure-Python twin is odradek/spark/columns.py (numpy); both accept and reject exactly the
 * same input and produce the same columns, tested side by side with hypothesis
 * (tests/spark/test_arrow_records.py). The caller (odradek/spark/decode.py) walks the batch
 * headers, checks each CRC-32C, skips control batches and decompresses; this module only sees
 * the records sections ("bodies") of the batches it kept.
 *
 * A body holds `count` records back to back, each
 *
 *     length          varint   bytes after this field, up to the end of the record
 *     attributes      int8     unused
 *     timestampDelta  varlong  timestamp - the batch's base timestamp
 *     offsetDelta     varint   offset - the batch's base offset
 *     keyLength       varint   -1 for a null key
 *     key             bytes
 *     valueLength     varint   -1 for a null value
 *     value           bytes
 *     headersCount    varint
 *       headerKeyLength varint, headerKey (UTF-8), headerValueLength varint (-1 null), value
 *
 * Varints are zig-zag LEB128 of at most 10 bytes, read as 64 bits (bits past 64 dropped; the
 * twin's numpy arithmetic does the same). Rules, each a CorruptRecordError naming the record:
 *   1. a record length is at least 6 and fits in what is left of its body (a length varint
 *      past 64 bits is rejected, not wrapped); `count` records fill the body exactly;
 *   2. every field varint ends inside its record; a key or value length is -1 or at most
 *      what is left of its record;
 *   3. the header count is not negative, and when it is 0 the record ends right after it.
 * Headers themselves (count > 0) are not parsed here: with `want_headers` the spans are
 * returned and decode.py parses them (one implementation for both twins).
 *
 * records_to_columns(bodies, counts, base_offsets, base_timestamps, append_timestamps,
 *                    from_offset, until_offset, want_key, want_value, want_headers)
 * validates every record of every body and returns, for the records with
 * from_offset <= offset < until_offset, in order, a tuple
 *
 *     (n, key, value, offsets, timestamps_us, timestamp_types, header_spans)
 *
 * key / value: (offsets, data, validity) -- Arrow `binary` buffers: int32 offsets (n + 1),
 *     the bytes, and a validity bitmap (LSB first, 1 = present) or None when nothing is null;
 *     None when not wanted.
 * offsets: int64 x n; timestamps_us: int64 x n, append_timestamps[i] when it is >= 0 (log
 *     append time) else base timestamp + delta, times 1000 (wrapping like int64 arithmetic);
 *     timestamp_types: int32 x n, 1 for log append time else 0.
 * header_spans: None unless want_headers; then int64 x 5 per kept record whose header count
 *     is above 0: (row, body index, position after the header count, record end, count).
 * All buffers are bytearrays (the caller wraps them with pa.py_buffer, no copy). No Python
 * object is created per record.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *corrupt_error; /* odradek.protocol.records.CorruptRecordError */

enum { VARINT_OK = 0, VARINT_TRUNCATED = 1, VARINT_TOO_LONG = 2, VARINT_OVERFLOW = 3 };

/* A zig-zag varint of at most 10 bytes at buf[*pos], not reading at or past `end`. Bits past
 * 64 are dropped, but reported as VARINT_OVERFLOW (only record lengths refuse them). */
static inline int
read_varint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    Py_ssize_t i = *pos;
    uint64_t raw = 0;
    int overflow = 0;
    for (int shift = 0;; shift += 7) {
        if (i >= end)
            return VARINT_TRUNCATED;
        if (shift > 63)
            return VARINT_TOO_LONG;
        uint64_t b = buf[i++];
        if (shift == 63 && (b & 0x7F) > 1)
            overflow = 1;
        raw |= (b & 0x7F) << shift;
        if (b < 0x80)
            break;
    }
    *out = (int64_t)((raw >> 1) ^ (0u - (raw & 1)));
    *pos = i;
    return overflow ? VARINT_OVERFLOW : VARINT_OK;
}

static int
corrupt(Py_ssize_t body, Py_ssize_t index, const char *what)
{
    PyErr_Format(corrupt_error, "batch %zd of the fetch, record %zd: %s", body, index, what);
    return -1;
}

/* -- growing output buffers (bytearrays) --------------------------------------------------- */

typedef struct {
    PyObject *array; /* a bytearray; NULL when the column is not wanted */
    Py_ssize_t used;
} Out;

static int
out_init(Out *o, Py_ssize_t capacity)
{
    o->used = 0;
    o->array = PyByteArray_FromStringAndSize(NULL, capacity > 0 ? capacity : 1);
    return o->array == NULL ? -1 : 0;
}

static inline char *
out_room(Out *o, Py_ssize_t more)
{
    Py_ssize_t size = PyByteArray_GET_SIZE(o->array);
    if (o->used + more > size) {
        Py_ssize_t want = size * 2;
        if (want < o->used + more)
            want = o->used + more;
        if (PyByteArray_Resize(o->array, want) < 0)
            return NULL;
    }
    return PyByteArray_AS_STRING(o->array) + o->used;
}

static int
out_finish(Out *o)
{
    return PyByteArray_Resize(o->array, o->used);
}

/* A binary column: int32 offsets, data, and validity bits (set as rows are added). */
typedef struct {
    Out offsets, data, validity;
    int wanted, any_null;
} Binary;

static int
binary_init(Binary *c, int wanted, Py_ssize_t rows, Py_ssize_t data_bytes)
{
    memset(c, 0, sizeof(*c));
    c->wanted = wanted;
    if (!wanted)
        return 0;
    if (out_init(&c->offsets, (rows + 1) * 4) < 0 || out_init(&c->data, data_bytes) < 0
        || out_init(&c->validity, rows / 8 + 1) < 0)
        return -1;
    memset(PyByteArray_AS_STRING(c->offsets.array), 0, 4);
    c->offsets.used = 4;
    return 0;
}

static int
binary_add(Binary *c, Py_ssize_t row, const uint8_t *bytes, int64_t length)
{
    if (!c->wanted)
        return 0;
    char *bits = out_room(&c->validity, 1);
    if (bits == NULL)
        return -1;
    if (row % 8 == 0) {
        *bits = 0;
        c->validity.used++;
    }
    if (length < 0) {
        c->any_null = 1;
    }
    else {
        PyByteArray_AS_STRING(c->validity.array)[row / 8] |= (char)(1 << (row % 8));
        if (c->data.used + length > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "more than 2 GiB of keys or values in one fetch");
            return -1;
        }
        char *to = out_room(&c->data, (Py_ssize_t)length);
        if (to == NULL)
            return -1;
        memcpy(to, bytes, (size_t)length);
        c->data.used += (Py_ssize_t)length;
    }
    char *offset = out_room(&c->offsets, 4);
    if (offset == NULL)
        return -1;
    int32_t end = (int32_t)c->data.used;
    memcpy(offset, &end, 4);
    c->offsets.used += 4;
    return 0;
}

/* (offsets, data, validity or None), or None when not wanted; NULL on error. */
static PyObject *
binary_result(Binary *c)
{
    if (!c->wanted)
        Py_RETURN_NONE;
    if (out_finish(&c->offsets) < 0 || out_finish(&c->data) < 0 || out_finish(&c->validity) < 0)
        return NULL;
    return Py_BuildValue("(OOO)", c->offsets.array, c->data.array,
                         c->any_null ? c->validity.array : Py_None);
}

static void
binary_clear(Binary *c)
{
    Py_CLEAR(c->offsets.array);
    Py_CLEAR(c->data.array);
    Py_CLEAR(c->validity.array);
}

/* -- one body ----------------------------------------------------------------------------- */

typedef struct {
    int64_t from_offset, until_offset;
    Binary key, value;
    Out offsets, timestamps, types, spans;
    int want_headers;
    Py_ssize_t rows;
} State;

static inline int
push_i64(Out *o, int64_t v)
{
    char *to = out_room(o, 8);
    if (to == NULL)
        return -1;
    memcpy(to, &v, 8);
    o->used += 8;
    return 0;
}

/* A field varint may drop bits past 64 (the twin's numpy arithmetic does too), nothing else. */
static inline int
field_ok(int code)
{
    return code == VARINT_OK || code == VARINT_OVERFLOW;
}

static int
decode_body(State *s, Py_ssize_t body_index, const uint8_t *buf, Py_ssize_t size, int64_t count,
            int64_t base_offset, int64_t base_ts, int64_t append_ts)
{
    Py_ssize_t pos = 0;
    int32_t type = append_ts >= 0 ? 1 : 0;
    for (int64_t index = 0; index < count; index++) {
        int64_t length, ts_delta, offset_delta, key_len, value_len, header_count;
        int code = read_varint(buf, &pos, size, &length);
        if (code != VARINT_OK)
            return corrupt(body_index, index, "bad record length varint");
        if (length < 6 || length > size - pos)
            return corrupt(body_index, index, "record length out of bounds");
        Py_ssize_t end = pos + (Py_ssize_t)length;
        pos++; /* attributes */
        if (!field_ok(read_varint(buf, &pos, end, &ts_delta))
            || !field_ok(read_varint(buf, &pos, end, &offset_delta))
            || !field_ok(read_varint(buf, &pos, end, &key_len)))
            return corrupt(body_index, index, "a field runs past the record");
        if (key_len < -1 || key_len > end - pos)
            return corrupt(body_index, index, "bad key length");
        Py_ssize_t key_at = pos;
        pos += key_len > 0 ? (Py_ssize_t)key_len : 0;
        if (!field_ok(read_varint(buf, &pos, end, &value_len)))
            return corrupt(body_index, index, "a field runs past the record");
        if (value_len < -1 || value_len > end - pos)
            return corrupt(body_index, index, "bad value length");
        Py_ssize_t value_at = pos;
        pos += value_len > 0 ? (Py_ssize_t)value_len : 0;
        if (!field_ok(read_varint(buf, &pos, end, &header_count)))
            return corrupt(body_index, index, "a field runs past the record");
        if (header_count < 0 || (header_count == 0 && pos != end))
            return corrupt(body_index, index, "bad header count or record length");
        int64_t offset = (int64_t)((uint64_t)base_offset + (uint64_t)offset_delta);
        Py_ssize_t header_at = pos;
        pos = end;
        if (offset < s->from_offset || offset >= s->until_offset)
            continue;
        Py_ssize_t row = s->rows++;
        int64_t ts = type ? append_ts : (int64_t)((uint64_t)base_ts + (uint64_t)ts_delta);
        if (binary_add(&s->key, row, buf + key_at, key_len) < 0
            || binary_add(&s->value, row, buf + value_at, value_len) < 0
            || push_i64(&s->offsets, offset) < 0
            || push_i64(&s->timestamps, (int64_t)((uint64_t)ts * 1000u)) < 0)
            return -1;
        char *to = out_room(&s->types, 4);
        if (to == NULL)
            return -1;
        memcpy(to, &type, 4);
        s->types.used += 4;
        if (s->want_headers && header_count > 0) {
            if (push_i64(&s->spans, row) < 0 || push_i64(&s->spans, body_index) < 0
                || push_i64(&s->spans, header_at) < 0 || push_i64(&s->spans, end) < 0
                || push_i64(&s->spans, header_count) < 0)
                return -1;
        }
    }
    if (pos != size)
        return corrupt(body_index, count, "the records do not fill their batch");
    return 0;
}

static int
int64_item(PyObject *list, Py_ssize_t i, int64_t *out)
{
    long long v = PyLong_AsLongLong(PyList_GET_ITEM(list, i));
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = (int64_t)v;
    return 0;
}

static PyObject *
records_to_columns(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *bodies, *counts, *base_offsets, *base_ts, *append_ts;
    long long from_offset, until_offset;
    int want_key, want_value, want_headers;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!LLppp:records_to_columns", &PyList_Type, &bodies,
                          &PyList_Type, &counts, &PyList_Type, &base_offsets, &PyList_Type,
                          &base_ts, &PyList_Type, &append_ts, &from_offset, &until_offset,
                          &want_key, &want_value, &want_headers))
        return NULL;
    Py_ssize_t batches = PyList_GET_SIZE(bodies);
    if (PyList_GET_SIZE(counts) != batches || PyList_GET_SIZE(base_offsets) != batches
        || PyList_GET_SIZE(base_ts) != batches || PyList_GET_SIZE(append_ts) != batches) {
        PyErr_SetString(PyExc_ValueError, "records_to_columns: lists of different lengths");
        return NULL;
    }
    Py_ssize_t total_rows = 0, total_bytes = 0;
    for (Py_ssize_t i = 0; i < batches; i++) {
        int64_t count;
        if (int64_item(counts, i, &count) < 0)
            return NULL;
        Py_ssize_t n = PyObject_Length(PyList_GET_ITEM(bodies, i));
        if (n < 0)
            return NULL;
        total_bytes += n;
        /* preallocation only: a record takes at least 7 bytes, whatever `count` claims */
        if (count > 0)
            total_rows += count < n / 7 + 1 ? (Py_ssize_t)count : n / 7 + 1;
    }
    State s;
    memset(&s, 0, sizeof(s));
    s.from_offset = from_offset;
    s.until_offset = until_offset;
    s.want_headers = want_headers;
    PyObject *result = NULL;
    if (binary_init(&s.key, want_key, total_rows, want_value ? 64 : total_bytes) < 0
        || binary_init(&s.value, want_value, total_rows, total_bytes) < 0
        || out_init(&s.offsets, total_rows * 8) < 0 || out_init(&s.timestamps, total_rows * 8) < 0
        || out_init(&s.types, total_rows * 4) < 0 || out_init(&s.spans, 40) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < batches; i++) {
        int64_t count, base_offset, base_timestamp, append_timestamp;
        if (int64_item(counts, i, &count) < 0 || int64_item(base_offsets, i, &base_offset) < 0
            || int64_item(base_ts, i, &base_timestamp) < 0
            || int64_item(append_ts, i, &append_timestamp) < 0)
            goto done;
        Py_buffer view;
        if (PyObject_GetBuffer(PyList_GET_ITEM(bodies, i), &view, PyBUF_SIMPLE) < 0)
            goto done;
        int rc = decode_body(&s, i, (const uint8_t *)view.buf, view.len, count, base_offset,
                             base_timestamp, append_timestamp);
        PyBuffer_Release(&view);
        if (rc < 0)
            goto done;
    }
    if (out_finish(&s.offsets) < 0 || out_finish(&s.timestamps) < 0 || out_finish(&s.types) < 0
        || out_finish(&s.spans) < 0)
        goto done;
    PyObject *key = binary_result(&s.key);
    if (key == NULL)
        goto done;
    PyObject *value = binary_result(&s.value);
    if (value == NULL) {
        Py_DECREF(key);
        goto done;
    }
    result = Py_BuildValue("(nNNOOOO)", s.rows, key, value, s.offsets.array, s.timestamps.array,
                           s.types.array, want_headers ? s.spans.array : Py_None);
done:
    binary_clear(&s.key);
    binary_clear(&s.value);
    Py_CLEAR(s.offsets.array);
    Py_CLEAR(s.timestamps.array);
    Py_CLEAR(s.types.array);
    Py_CLEAR(s.spans.array);
    return result;
}

static PyMethodDef methods[] = {
    {"records_to_columns", records_to_columns, METH_VARARGS,
     "Validate RecordBatch v2 record sections and build Arrow column buffers (see the module "
     "source's header)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "odradek.spark._arrow_records",
    .m_doc = "RecordBatch v2 record sections to Arrow column buffers in C (twin: "
             "odradek.spark.columns).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__arrow_records(void)
{
    if (corrupt_error == NULL) {
        PyObject *records = PyImport_ImportModule("odradek.protocol.records");
        if (records == NULL)
            return NULL;
        corrupt_error = PyObject_GetAttrString(records, "CorruptRecordError");
        Py_DECREF(records);
        if (corrupt_error == NULL)
            return NULL;
    }
    return PyModule_Create(&module);
}
