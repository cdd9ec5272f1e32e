/* Dedupe as a batch: the key, its fingerprint and the seen-set in one loop over a block.
 *
 * Part of the optional _fastpath extension (see _fastpath.c).  dedupe_block() walks the
 * lines of a block of bytes; each line the fast path answers (already canonical ASCII:
 * fastpath_check), or else the common alias rungs (alias_key, _aliases.c: the key and
 * the rungs that changed it, as ladder.fused_rungs), is fingerprinted here (BLAKE2b, RFC 7693, 8-byte digest read big-endian,
 * as iri_scrapy.store.dedupe.fingerprint) and added to a FingerprintTable, and written to
 * the output if it is the first of its resource.  At the first line it cannot answer it
 * stops and says where: the caller hands that line to the Python reference
 * (Deduper.process, which takes the fused pass or climbs the ladder) and calls again after it, so the order of
 * first spellings, the output and the statistics are those of the streaming path.
 * FingerprintTable is iri_scrapy.store.fpstore.FingerprintSet in C: the same segments,
 * growth and sizes, so the same memory figures.  Only the stable ABI (abi3, 3.10+).
 */
#include "_fastpath.h"  /* Python.h first */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_blake2b.h"

/* --- BLAKE2b with an 8-byte digest, no key (RFC 7693): _blake2b.h ----------------- */

/* int.from_bytes(blake2b(data, digest_size=8).digest(), "big") */
static uint64_t
fingerprint64(const char *data, size_t n)
{
    uint64_t h0 = blake2b_digest8((const unsigned char *)data, n);
    uint64_t big = 0;  /* the digest is h0 little-endian; read it big-endian */
    for (int k = 0; k < 8; k++) big = (big << 8) | ((h0 >> (8 * k)) & 0xFF);
    return big;
}

/* --- FingerprintTable: fpstore.FingerprintSet in C ------------------------------------ */

#define SEGMENT_BITS 12
#define SEGMENTS (1 << SEGMENT_BITS)
#define LOW52 0xFFFFFFFFFFFFFULL
#define MIN_SEGMENT_SLOTS 4

typedef struct {
    uint64_t *slots;
    size_t size;
    Py_ssize_t room;  /* adds left before the segment grows */
} segment;

typedef struct {
    PyObject_HEAD
    segment *segs;
    size_t len, total, peak;  /* values, slots of all segments, most slots at once */
} table_object;

/* floor((low52 * size) / 2**52) without overflow for size < 2**38 (fpstore's first slot). */
static size_t
first_slot(uint64_t value, size_t size)
{
    uint64_t low = value & LOW52, hi = low >> 26, lo = low & ((1ULL << 26) - 1);
    return (size_t)((hi * size + ((lo * size) >> 26)) >> 26);
}

static size_t
grown(size_t slots)
{
    return slots < 128 ? 2 * slots : ((slots * 5) / 4 + 3) & ~(size_t)3;
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Segment s rebuilt 1/4 larger (fpstore's _grow and _placed: sorted values, no probing). */
static int
grow_segment(table_object *self, size_t s)
{
    segment *seg = &self->segs[s];
    size_t size = grown(seg->size), count = 0;
    uint64_t *values = PyMem_Malloc(seg->size * sizeof(uint64_t));
    uint64_t *fresh = PyMem_Calloc(size, sizeof(uint64_t));
    if (values == NULL || fresh == NULL) {
        PyMem_Free(values);
        PyMem_Free(fresh);
        PyErr_NoMemory();
        return -1;
    }
    for (size_t k = 0; k < seg->size; k++)
        if (seg->slots[k]) values[count++] = seg->slots[k];
    qsort(values, count, sizeof(uint64_t), cmp_u64);
    size_t last = 0, n_wrapped = 0;
    int any = 0;
    for (size_t k = 0; k < count; k++) {
        size_t i = first_slot(values[k], size);
        if (any && i <= last) {
            i = last + 1;
            if (i == size) {
                values[n_wrapped++] = values[k];  /* k >= n_wrapped: safe in place */
                continue;
            }
        }
        fresh[i] = values[k];
        last = i;
        any = 1;
    }
    for (size_t k = 0; k < n_wrapped; k++) {
        size_t i = 0;
        while (fresh[i]) i++;
        fresh[i] = values[k];
    }
    PyMem_Free(values);
    if (self->total + size > self->peak) self->peak = self->total + size;
    self->total += size - seg->size;
    PyMem_Free(seg->slots);
    seg->slots = fresh;
    seg->room = (Py_ssize_t)((size * 3) / 4) - (Py_ssize_t)count;
    seg->size = size;
    return 0;
}

/* 1 if value was new, 0 if it was there, -1 on error (no memory). */
static int
table_add_value(table_object *self, uint64_t value)
{
    if (!value) value = 1;
    size_t s = (size_t)(value >> (64 - SEGMENT_BITS));
    segment *seg = &self->segs[s];
    size_t size = seg->size, i = first_slot(value, size);
    for (;;) {
        uint64_t slot = seg->slots[i];
        if (slot == value) return 0;
        if (!slot) break;
        if (++i == size) i = 0;
    }
    seg->slots[i] = value;
    self->len++;
    if (--seg->room < 0 && grow_segment(self, s) < 0) return -1;
    return 1;
}

static int
table_has_value(table_object *self, uint64_t value)
{
    if (!value) value = 1;
    segment *seg = &self->segs[value >> (64 - SEGMENT_BITS)];
    size_t size = seg->size, i = first_slot(value, size);
    for (;;) {
        uint64_t slot = seg->slots[i];
        if (slot == value) return 1;
        if (!slot) return 0;
        if (++i == size) i = 0;
    }
}

static PyObject *table_type;  /* the heap type, for the isinstance check of dedupe_block */

static PyObject *
table_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (!PyArg_ParseTuple(args, "") || (kwds != NULL && PyObject_Length(kwds) > 0)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "FingerprintTable()");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    table_object *self = (table_object *)alloc(type, 0);
    if (self == NULL) return NULL;
    self->segs = PyMem_Calloc(SEGMENTS, sizeof(segment));
    if (self->segs == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (size_t s = 0; s < SEGMENTS; s++) {
        self->segs[s].slots = PyMem_Calloc(MIN_SEGMENT_SLOTS, sizeof(uint64_t));
        if (self->segs[s].slots == NULL) {
            Py_DECREF(self);
            return PyErr_NoMemory();
        }
        self->segs[s].size = MIN_SEGMENT_SLOTS;
        self->segs[s].room = (MIN_SEGMENT_SLOTS * 3) / 4;
    }
    self->total = self->peak = (size_t)SEGMENTS * MIN_SEGMENT_SLOTS;
    return (PyObject *)self;
}

static void
table_dealloc(PyObject *obj)
{
    table_object *self = (table_object *)obj;
    PyTypeObject *type = Py_TYPE(obj);
    if (self->segs != NULL) {
        for (size_t s = 0; s < SEGMENTS; s++) PyMem_Free(self->segs[s].slots);
        PyMem_Free(self->segs);
    }
    freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
    tp_free(obj);
    Py_DECREF(type);
}

static int
as_u64(PyObject *obj, uint64_t *out)
{
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (uint64_t)v;
    return 0;
}

static PyObject *
table_add(PyObject *obj, PyObject *value)
{
    uint64_t v;
    if (as_u64(value, &v) < 0) return NULL;
    int added = table_add_value((table_object *)obj, v);
    if (added < 0) return NULL;
    return PyBool_FromLong(added);
}

static int
table_contains(PyObject *obj, PyObject *value)
{
    if (!PyLong_Check(value)) return 0;
    uint64_t v;
    if (as_u64(value, &v) < 0) {  /* negative or too large: not a record */
        PyErr_Clear();
        return 0;
    }
    return table_has_value((table_object *)obj, v);
}

static Py_ssize_t
table_len(PyObject *obj)
{
    return (Py_ssize_t)((table_object *)obj)->len;
}

static PyObject *
table_nbytes(PyObject *obj, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(8 * ((table_object *)obj)->total);
}

static PyObject *
table_peak_nbytes(PyObject *obj, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(8 * ((table_object *)obj)->peak);
}

static PyMethodDef table_methods[] = {
    {"add", table_add, METH_O, "add(value) -> bool: True if the 64-bit value was new."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef table_getset[] = {
    {"nbytes", table_nbytes, NULL, "Bytes held by the tables.", NULL},
    {"peak_nbytes", table_peak_nbytes, NULL, "The most bytes the tables held at once.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot table_slots[] = {
    {Py_tp_new, table_new},
    {Py_tp_dealloc, table_dealloc},
    {Py_tp_methods, table_methods},
    {Py_tp_getset, table_getset},
    {Py_sq_contains, table_contains},
    {Py_sq_length, table_len},
    {Py_tp_doc, "A set of 64-bit fingerprints: iri_scrapy.store.fpstore.FingerprintSet in C."},
    {0, NULL},
};

static PyType_Spec table_spec = {
    "iri_scrapy.core._fastpath.FingerprintTable", sizeof(table_object), 0, Py_TPFLAGS_DEFAULT,
    table_slots,
};

/* --- the loop ------------------------------------------------------------------------ */

typedef struct {
    char *data;
    size_t len, cap;
} outbuf;

static int
out_put(outbuf *out, const void *s, size_t n, int newline)
{
    if (out->len + n + 1 > out->cap) {
        size_t cap = out->cap ? out->cap : 65536;
        while (out->len + n + 1 > cap) cap *= 2;
        char *data = PyMem_Realloc(out->data, cap);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        out->data = data;
        out->cap = cap;
    }
    memcpy(out->data + out->len, s, n);
    out->len += n;
    if (newline) out->data[out->len++] = '\n';
    return 0;
}

static int
out_append(outbuf *out, const char *s, size_t n)
{
    return out_put(out, s, n, 1);
}

/* The buffer as bytes (steals it: freed here). */
static PyObject *
out_bytes(outbuf *out)
{
    PyObject *bytes = PyBytes_FromStringAndSize(out->data ? out->data : "", (Py_ssize_t)out->len);
    PyMem_Free(out->data);
    out->data = NULL;
    return bytes;
}

/* dedupe_block(table, block, start, keep_fragment, write_key)
 *   -> (stop, next, out, first, duplicates, first_by_rung, duplicates_by_rung)
 *
 * From offset start, each line of block (up to "\n"; the line less its end of line,
 * "\r\n" or "\n", as the CLI decodes it) that the fast path answers, or else the alias
 * rungs (alias_key, _aliases.c), is counted: first spelling (written to out, the line or
 * with write_key its key, then "\n") or duplicate, and in the by_rung tuple of either
 * under what Deduper.add counts: "simple" for a line no rung changed and whose fragment
 * was kept, else each rung that changed it (in the order configure_aliases gave their
 * bits) and "fragment" when its fragment was dropped (the tuples: simple, the
 * ALIAS_RUNGS rungs, fragment).  Stops before the first line neither answers:
 * [stop, next) is that line with its end of line (stop == len(block) at the end).  A
 * last line without "\n" keeps a final "\r" (then the reference answers).
 *
 * dedupe_block(table, block, start, keep_fragment, write_key, True) records each line it
 * answers (the Spark pass: a row per line) and returns three more bytes objects, one item
 * per answered line in order: fps (its fingerprint, 8 bytes native-endian), rungs (1
 * byte: bit k for the k-th alias rung that changed it, bit ALIAS_RUNGS for a dropped
 * fragment) and added (1 byte: 1 if first of its resource); out then holds every
 * answered line's key, each with "\n", when write_key, else nothing. */
#if ALIAS_RUNGS != 4
#error "dedupe_block builds its by_rung tuples for four alias rungs"
#endif

static PyObject *
dedupe_block(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 5 && nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "dedupe_block(table, block, start, keep_fragment, write_key[, record])");
        return NULL;
    }
    if (!fastpath_ready()) {
        PyErr_SetString(PyExc_RuntimeError, "iri_scrapy.core._fastpath is not configured");
        return NULL;
    }
    int is_table = PyObject_IsInstance(args[0], table_type);
    if (is_table <= 0) {
        if (is_table == 0) PyErr_SetString(PyExc_TypeError, "a FingerprintTable is needed");
        return NULL;
    }
    table_object *table = (table_object *)args[0];
    char *buf;
    Py_ssize_t size;
    if (PyBytes_AsStringAndSize(args[1], &buf, &size) < 0) return NULL;
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    if (start < 0 || start > size) {
        PyErr_SetString(PyExc_ValueError, "start outside the block");
        return NULL;
    }
    int keep_fragment = PyObject_IsTrue(args[3]), write_key = PyObject_IsTrue(args[4]);
    if (keep_fragment < 0 || write_key < 0) return NULL;
    int record = nargs == 6 ? PyObject_IsTrue(args[5]) : 0;
    if (record < 0) return NULL;
    outbuf fps = {NULL, 0, 0}, masks = {NULL, 0, 0}, news = {NULL, 0, 0};
    size_t n = (size_t)size, pos = (size_t)start, next = n;
    Py_ssize_t lines[2] = {0, 0};  /* first spellings, duplicates */
    Py_ssize_t rungs[2][ALIAS_RUNGS + 2];  /* of each: simple, the rungs, fragment */
    memset(rungs, 0, sizeof rungs);
    char scratch[ALIAS_OUT];
    outbuf out = {NULL, 0, 0};
    while (pos < n) {
        const char *line = buf + pos;
        const char *nl = memchr(line, '\n', n - pos);
        size_t len = nl ? (size_t)(nl - line) : n - pos;
        next = nl ? pos + len + 1 : n;
        if (nl && len && line[len - 1] == '\r') len--;
        const char *key = line;
        int mask = 0, fragment;
        Py_ssize_t key_len = fastpath_check(line, len, keep_fragment);
        if (key_len == FASTPATH_ERROR) goto fail;
        if (key_len != FASTPATH_NO) {
            fragment = !keep_fragment && (size_t)key_len < len;
        } else {
            key_len = alias_key(line, len, keep_fragment, scratch, &mask);
            if (key_len == FASTPATH_ERROR) goto fail;
            if (key_len == FASTPATH_NO) break;
            key = scratch;
            fragment = !keep_fragment && memchr(line, '#', len) != NULL;
        }
        uint64_t fp = fingerprint64(key, (size_t)key_len);
        int added = table_add_value(table, fp);
        if (added < 0) goto fail;
        Py_ssize_t *counts = rungs[added ? 0 : 1];
        lines[added ? 0 : 1]++;
        if (!mask && !fragment) counts[0]++;
        unsigned char bits = fragment ? 1 << ALIAS_RUNGS : 0;  /* the record's rungs */
        for (int bit = 1; mask; bit <<= 1) {
            if (!(mask & bit)) continue;
            int k = alias_rung_index(bit);
            counts[1 + k]++;
            bits |= (unsigned char)(1 << k);
            mask &= ~bit;
        }
        if (fragment) counts[ALIAS_RUNGS + 1]++;
        if (record) {
            unsigned char first = (unsigned char)added;
            if (out_put(&fps, &fp, sizeof fp, 0) < 0 || out_put(&masks, &bits, 1, 0) < 0
                || out_put(&news, &first, 1, 0) < 0
                || (write_key && out_append(&out, key, (size_t)key_len) < 0))
                goto fail;
        } else if (added && out_append(&out, write_key ? key : line,
                                       write_key ? (size_t)key_len : len) < 0) {
            goto fail;
        }
        pos = next;
    }
    if (pos >= n) pos = next = n;
    PyObject *written = out_bytes(&out);
    if (written == NULL) goto fail;
    if (record) {
        PyObject *fp_bytes = out_bytes(&fps), *mask_bytes = out_bytes(&masks);
        PyObject *new_bytes = out_bytes(&news);
        if (fp_bytes == NULL || mask_bytes == NULL || new_bytes == NULL) {
            Py_DECREF(written);
            Py_XDECREF(fp_bytes);
            Py_XDECREF(mask_bytes);
            Py_XDECREF(new_bytes);
            return NULL;
        }
        return Py_BuildValue("nnNnn(nnnnnn)(nnnnnn)NNN", (Py_ssize_t)pos, (Py_ssize_t)next,
                             written, lines[0], lines[1], rungs[0][0], rungs[0][1], rungs[0][2],
                             rungs[0][3], rungs[0][4], rungs[0][5], rungs[1][0], rungs[1][1],
                             rungs[1][2], rungs[1][3], rungs[1][4], rungs[1][5],
                             fp_bytes, mask_bytes, new_bytes);
    }
    return Py_BuildValue("nnNnn(nnnnnn)(nnnnnn)", (Py_ssize_t)pos, (Py_ssize_t)next, written,
                         lines[0], lines[1], rungs[0][0], rungs[0][1], rungs[0][2], rungs[0][3],
                         rungs[0][4], rungs[0][5], rungs[1][0], rungs[1][1], rungs[1][2],
                         rungs[1][3], rungs[1][4], rungs[1][5]);
fail:
    PyMem_Free(out.data);
    PyMem_Free(fps.data);
    PyMem_Free(masks.data);
    PyMem_Free(news.data);
    return NULL;
}

/* fingerprint(data: bytes) -> int: as iri_scrapy.store.dedupe.fingerprint of its text. */
static PyObject *
fingerprint(PyObject *module, PyObject *data)
{
    (void)module;
    char *buf;
    Py_ssize_t size;
    if (PyBytes_AsStringAndSize(data, &buf, &size) < 0) return NULL;
    return PyLong_FromUnsignedLongLong(fingerprint64(buf, (size_t)size));
}

static PyMethodDef batch_methods[] = {
    {"dedupe_block", (PyCFunction)(void (*)(void))dedupe_block, METH_FASTCALL,
     "dedupe_block(table, block, start, keep_fragment, write_key[, record]): see _batch.c."},
    {"fingerprint", fingerprint, METH_O,
     "fingerprint(data) -> int: BLAKE2b-64 of data, read big-endian."},
    {NULL, NULL, 0, NULL},
};

int
batch_init(PyObject *module)
{
    table_type = PyType_FromSpec(&table_spec);
    if (table_type == NULL) return -1;
    Py_INCREF(table_type);
    if (PyModule_AddObject(module, "FingerprintTable", table_type) < 0) {
        Py_DECREF(table_type);
        return -1;
    }
    return PyModule_AddFunctions(module, batch_methods);
}
