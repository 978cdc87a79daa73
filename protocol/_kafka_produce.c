/* odradek.protocol._kafka_produce: the body of a Kafka ProduceRequest v3-v9, decoded in C.
 * The pure-Python twin is the generated decoder (protocol/kafka/compiler.py of the PRODUCE
 * layout in protocol/kafka/apis_data.py); protocol/kafka/codec.py calls this one instead when
 * protocol/native.py loads it. Both return equal values on every input, or both raise
 * KafkaMalformed (tests/protocol/kafka/test_produce_native.py runs them side by side).
 *
 * decode_produce(body, pos, flexible) -> (fields, end). `body`: the request frame body, a
 * bytes-like object of unsigned bytes (bytes, bytearray, a one-dimensional contiguous memoryview
 * of format "B"); `pos`: where the request struct starts (after the request header); `flexible`:
 * true for v9 (compact lengths, tagged fields), false for v3-v8. `end` is the position after
 * the struct: the caller refuses trailing bytes. `fields`, with the keys in this order:
 *
 *     {"transactional_id": str | None, "acks": int, "timeout_ms": int,
 *      "topic_data": [{"name": str,
 *                      "partition_data": [{"index": int, "records": memoryview | None}]}]}
 *
 * Byte layout (big-endian; classic = v3-v8, flexible = v9):
 *
 *     transactional_id  classic: int16 length, -1 = null   flexible: uvarint length + 1, 0 = null
 *     acks              int16
 *     timeout_ms        int32
 *     topic_data        classic: int32 count             flexible: uvarint count + 1 (0 = null:
 *                                                         malformed, the array is not nullable)
 *       name            string as above, not nullable
 *       partition_data  array as above, not nullable
 *         index         int32
 *         records       classic: int32 length, -1 = null  flexible: uvarint length + 1, 0 = null
 *         [tagged fields]                                  flexible only
 *       [tagged fields]                                    flexible only
 *     [tagged fields]                                      flexible only
 *
 * A uvarint is base-128, low group first, at most 5 bytes (up to 35 bits; held in a uint64_t).
 * A tagged-field section is a uvarint count, then per field uvarint tag, uvarint size and `size`
 * bytes; tags strictly ascending; Produce defines no tagged field, so every one is skipped.
 *
 * Refused with KafkaMalformed (odradek.protocol.kafka.primitives), exactly where the generated
 * decoder refuses: any read past the end of `body`; a varint longer than 5 bytes; a negative
 * classic length or count other than -1; a null name, topic_data or partition_data; strings
 * that are not strict UTF-8; an array count larger than the bytes left after it; a payload or
 * tagged field running past the end; tags not ascending. One check is earlier than the twin's
 * but refuses nothing the twin accepts: an array count whose elements could not fit in the
 * bytes left even at their smallest (MIN_* below) is refused before any element is read (the
 * twin refuses the same body later, on the element that runs out); so the lists are allocated
 * by a count the buffer can back, never by a claimed count alone.
 *
 * Memory: `records` values are memoryview slices of `body` (a view of it when `body` is not a
 * memoryview): zero copy; each holds the buffer as any memoryview slice does. The function
 * keeps no reference after it returns (its Py_buffer is released on every path); every read
 * is at an index checked to be below the buffer's length first, and positions are Py_ssize_t
 * sums of a position below the length and a length below 2^35, so they cannot overflow.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_UVARINT_BYTES 5
/* the fewest bytes an element can take when it decodes */
#define MIN_TOPIC_CLASSIC 6     /* int16 name length, int32 partition count */
#define MIN_TOPIC_FLEXIBLE 3    /* name length, partition count, tagged count: a byte each */
#define MIN_PARTITION_CLASSIC 8 /* int32 index, int32 records length */
#define MIN_PARTITION_FLEXIBLE 6 /* int32 index, records length, tagged count */

static PyObject *kafka_malformed; /* odradek.protocol.kafka.primitives.KafkaMalformed */
static PyObject *k_transactional_id, *k_acks, *k_timeout_ms, *k_topic_data, *k_name,
    *k_partition_data, *k_index, *k_records;

typedef struct {
    const uint8_t *p;
    Py_ssize_t n;   /* bytes in the buffer */
    Py_ssize_t pos; /* next byte to read, 0 <= pos <= n */
    int flexible;
    PyObject *view; /* the memoryview that `records` slices are cut from */
} Reader;

static int
malformed(const char *message)
{
    PyErr_SetString(kafka_malformed, message);
    return -1;
}

/* -- primitives: 0 on success, -1 with KafkaMalformed set ----------------------------------- */

static int
read_uvarint(Reader *r, uint64_t *out)
{
    uint64_t value = 0;
    for (int i = 0; i < MAX_UVARINT_BYTES; i++) {
        if (r->pos >= r->n)
            return malformed("varint runs past the end of the frame");
        uint8_t byte = r->p[r->pos++];
        value |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (byte < 0x80) {
            *out = value;
            return 0;
        }
    }
    return malformed("varint longer than 5 bytes");
}

static int
read_int16(Reader *r, int16_t *out, const char *what)
{
    if (r->n - r->pos < 2)
        return malformed(what);
    const uint8_t *b = r->p + r->pos;
    *out = (int16_t)(uint16_t)((b[0] << 8) | b[1]);
    r->pos += 2;
    return 0;
}

static int
read_int32(Reader *r, int32_t *out, const char *what)
{
    if (r->n - r->pos < 4)
        return malformed(what);
    const uint8_t *b = r->p + r->pos;
    *out = (int32_t)(((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) |
                     (uint32_t)b[3]);
    r->pos += 4;
    return 0;
}

/* A length-prefixed field's payload length: -1 for null. Classic strings have an int16
 * length, classic bytes an int32 one; compact ones a uvarint of length + 1. The payload must
 * lie within the buffer. */
static int
read_length(Reader *r, int classic_width, Py_ssize_t *out)
{
    Py_ssize_t length;
    if (r->flexible) {
        uint64_t raw;
        if (read_uvarint(r, &raw) < 0)
            return -1;
        length = (Py_ssize_t)raw - 1; /* raw < 2^35 */
    } else if (classic_width == 2) {
        int16_t raw;
        if (read_int16(r, &raw, "string length runs past the end of the frame") < 0)
            return -1;
        length = raw;
    } else {
        int32_t raw;
        if (read_int32(r, &raw, "bytes length runs past the end of the frame") < 0)
            return -1;
        length = raw;
    }
    if (length < -1)
        return malformed("negative length");
    if (length > r->n - r->pos)
        return malformed("a string or bytes field runs past the end of the frame");
    *out = length;
    return 0;
}

/* A string (None when null and `nullable`; a null otherwise is malformed). New reference. */
static PyObject *
read_string(Reader *r, int nullable, const char *what)
{
    Py_ssize_t length;
    if (read_length(r, 2, &length) < 0)
        return NULL;
    if (length < 0) {
        if (!nullable) {
            PyErr_Format(kafka_malformed, "%s is null", what);
            return NULL;
        }
        Py_RETURN_NONE;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)r->p + r->pos, length, "strict");
    if (text == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            malformed("string is not UTF-8");
        }
        return NULL;
    }
    r->pos += length;
    return text;
}

/* An array's element count; a null array is malformed (none is nullable in Produce). The
 * count must not exceed the bytes left (the twin's rule), and `min_item` bytes per element
 * must fit (refused earlier than the twin would, see the top of the file). */
static int
read_count(Reader *r, Py_ssize_t min_item, const char *what, Py_ssize_t *out)
{
    Py_ssize_t count;
    if (r->flexible) {
        uint64_t raw;
        if (read_uvarint(r, &raw) < 0)
            return -1;
        count = (Py_ssize_t)raw - 1;
    } else {
        int32_t raw;
        if (read_int32(r, &raw, "array count runs past the end of the frame") < 0)
            return -1;
        if (raw < -1)
            return malformed("negative array count");
        count = raw;
    }
    /* the twin's rule, count <= bytes left, is implied by the min_item one below */
    if (count < 0) {
        PyErr_Format(kafka_malformed, "%s is null", what);
        return -1;
    }
    if (count > (r->n - r->pos) / min_item)
        return malformed("array elements cannot fit in the bytes left");
    *out = count;
    return 0;
}

/* Skip a tagged-field section (flexible only): one zero byte, or fields with ascending tags,
 * each within the buffer. Every field read consumes at least two bytes, so the loop ends. */
static int
skip_tagged(Reader *r)
{
    if (!r->flexible)
        return 0;
    if (r->pos < r->n && r->p[r->pos] == 0) {
        r->pos++;
        return 0;
    }
    uint64_t count, tag, size;
    int64_t last = -1;
    if (read_uvarint(r, &count) < 0)
        return -1;
    for (uint64_t i = 0; i < count; i++) {
        if (read_uvarint(r, &tag) < 0 || read_uvarint(r, &size) < 0)
            return -1;
        if ((int64_t)tag <= last)
            return malformed("tagged field out of order");
        last = (int64_t)tag;
        if ((Py_ssize_t)size > r->n - r->pos)
            return malformed("tagged field runs past the end of the frame");
        r->pos += (Py_ssize_t)size;
    }
    return 0;
}

/* -- the structs: each returns a new dict, or NULL with an exception set -------------------- */

static PyObject *
read_partition(Reader *r)
{
    int32_t index;
    Py_ssize_t length;
    if (read_int32(r, &index, "index runs past the end") < 0 || read_length(r, 4, &length) < 0)
        return NULL;
    PyObject *records;
    if (length < 0) {
        records = Py_NewRef(Py_None);
    } else {
        records = PySequence_GetSlice(r->view, r->pos, r->pos + length);
        if (records == NULL)
            return NULL;
        r->pos += length;
    }
    PyObject *index_obj = PyLong_FromLong(index);
    PyObject *part = index_obj == NULL ? NULL : PyDict_New();
    if (part == NULL || PyDict_SetItem(part, k_index, index_obj) < 0 ||
        PyDict_SetItem(part, k_records, records) < 0 || skip_tagged(r) < 0) {
        Py_XDECREF(part);
        part = NULL;
    }
    Py_XDECREF(index_obj);
    Py_DECREF(records);
    return part;
}

/* A list of `read_item` results, its count read first. */
static PyObject *
read_array(Reader *r, PyObject *(*read_item)(Reader *), Py_ssize_t min_item, const char *what)
{
    Py_ssize_t count;
    if (read_count(r, min_item, what, &count) < 0)
        return NULL;
    PyObject *items = PyList_New(count); /* unset slots are NULL, which dealloc skips */
    if (items == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = read_item(r);
        if (item == NULL) {
            Py_DECREF(items);
            return NULL;
        }
        PyList_SET_ITEM(items, i, item);
    }
    return items;
}

static PyObject *
read_topic(Reader *r)
{
    PyObject *name = read_string(r, 0, "name");
    if (name == NULL)
        return NULL;
    PyObject *parts = read_array(
        r, read_partition, r->flexible ? MIN_PARTITION_FLEXIBLE : MIN_PARTITION_CLASSIC,
        "partition_data");
    PyObject *topic = parts == NULL ? NULL : PyDict_New();
    if (topic == NULL || PyDict_SetItem(topic, k_name, name) < 0 ||
        PyDict_SetItem(topic, k_partition_data, parts) < 0 || skip_tagged(r) < 0) {
        Py_XDECREF(topic);
        topic = NULL;
    }
    Py_DECREF(name);
    Py_XDECREF(parts);
    return topic;
}

static PyObject *
read_request(Reader *r)
{
    PyObject *transactional_id = read_string(r, 1, "transactional_id");
    if (transactional_id == NULL)
        return NULL;
    int16_t acks;
    int32_t timeout_ms;
    PyObject *acks_obj = NULL, *timeout_obj = NULL, *topics = NULL, *request = NULL;
    if (read_int16(r, &acks, "acks runs past the end") < 0 ||
        read_int32(r, &timeout_ms, "acks runs past the end") < 0)
        goto done;
    topics = read_array(r, read_topic, r->flexible ? MIN_TOPIC_FLEXIBLE : MIN_TOPIC_CLASSIC,
                        "topic_data");
    if (topics == NULL || (acks_obj = PyLong_FromLong(acks)) == NULL ||
        (timeout_obj = PyLong_FromLong(timeout_ms)) == NULL || (request = PyDict_New()) == NULL)
        goto done;
    if (PyDict_SetItem(request, k_transactional_id, transactional_id) < 0 ||
        PyDict_SetItem(request, k_acks, acks_obj) < 0 ||
        PyDict_SetItem(request, k_timeout_ms, timeout_obj) < 0 ||
        PyDict_SetItem(request, k_topic_data, topics) < 0 || skip_tagged(r) < 0)
        Py_CLEAR(request);
done:
    Py_DECREF(transactional_id);
    Py_XDECREF(acks_obj);
    Py_XDECREF(timeout_obj);
    Py_XDECREF(topics);
    return request;
}

/* -- the entry point ------------------------------------------------------------------------ */

static PyObject *
decode_produce(PyObject *self, PyObject *args)
{
    PyObject *body;
    Py_ssize_t pos;
    int flexible;
    if (!PyArg_ParseTuple(args, "Onp:decode_produce", &body, &pos, &flexible))
        return NULL;
    PyObject *view = PyMemoryView_Check(body) ? Py_NewRef(body) : PyMemoryView_FromObject(body);
    if (view == NULL)
        return NULL;
    Py_buffer *vb = PyMemoryView_GET_BUFFER(view);
    if (vb->ndim != 1 || vb->itemsize != 1 || !PyBuffer_IsContiguous(vb, 'C') ||
        (vb->format != NULL && strcmp(vb->format, "B") != 0)) {
        Py_DECREF(view);
        PyErr_SetString(PyExc_TypeError, "decode_produce needs a contiguous buffer of bytes");
        return NULL;
    }
    Py_buffer buf;
    if (PyObject_GetBuffer(view, &buf, PyBUF_SIMPLE) < 0) {
        Py_DECREF(view);
        return NULL;
    }
    PyObject *result = NULL;
    if (pos < 0 || pos > buf.len) {
        PyErr_SetString(PyExc_ValueError, "pos is outside the body");
    } else {
        Reader r = {(const uint8_t *)buf.buf, buf.len, pos, flexible, view};
        PyObject *request = read_request(&r);
        if (request != NULL) {
            result = Py_BuildValue("(Nn)", request, r.pos);
        }
    }
    PyBuffer_Release(&buf);
    Py_DECREF(view);
    return result;
}

/* -- module ------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"decode_produce", decode_produce, METH_VARARGS,
     "decode_produce(body, pos, flexible) -> (fields, end): a ProduceRequest v3-v9 struct "
     "(records as memoryview slices of body); raises KafkaMalformed"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "odradek.protocol._kafka_produce",
    .m_doc = "Kafka ProduceRequest v3-v9 bodies decoded in C (see protocol/kafka/codec.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__kafka_produce(void)
{
    if (kafka_malformed == NULL) {
        PyObject *primitives = PyImport_ImportModule("odradek.protocol.kafka.primitives");
        if (primitives == NULL)
            return NULL;
        kafka_malformed = PyObject_GetAttrString(primitives, "KafkaMalformed");
        Py_DECREF(primitives);
        if (kafka_malformed == NULL)
            return NULL;
    }
    struct {
        PyObject **key;
        const char *text;
    } keys[] = {
        {&k_transactional_id, "transactional_id"}, {&k_acks, "acks"},
        {&k_timeout_ms, "timeout_ms"},             {&k_topic_data, "topic_data"},
        {&k_name, "name"},                         {&k_partition_data, "partition_data"},
        {&k_index, "index"},                       {&k_records, "records"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (*keys[i].key == NULL && (*keys[i].key = PyUnicode_InternFromString(keys[i].text)) == NULL)
            return NULL;
    }
    return PyModule_Create(&module);
}
