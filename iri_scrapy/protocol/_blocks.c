/* The page fingerprint's block cutter in C (optional): what
 * iri_scrapy.protocol.fingerprint._Blocks.markup does, the same blocks in the same order.
 *
 * Optional: a build without a C compiler leaves it out and fingerprint.py cuts pages with
 * its pure-Python reference (_Blocks), which this module must agree with on every input
 * (tests/protocol/test_fingerprint_same.py runs both over real pages, the generated
 * sites and generated markup).  It holds no rule of its own: the block-level and void
 * tags, the attribute names a tag is looked at for and those it keeps, the punctuation
 * a label's word is stripped of, the bounds, the whitespace of str.split(),
 * html.unescape, the word shapes of labels and the characters it must not meet are
 * handed to configure() by fingerprint.py, from its own definitions.
 * Where the reference's answer depends on Unicode case rules (a tag or data- attribute
 * name that is not ASCII, a character the hint's IGNORECASE folds onto an ASCII
 * letter) or where a linear search would grow with hostile input (more than 64 data-
 * attributes in one tag, or pairs in one query), cut() answers None and the reference
 * does the page.  Only the stable ABI (abi3, Python 3.10+) is used.
 *
 * The hashes are BLAKE2b (RFC 7693) with an 8-byte digest, as hashlib.blake2b(
 * digest_size=8) gives them, of the UTF-8 (surrogates passed) of the same strings.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../core/_blake2b.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH_CAP 256 /* the most MAX_DEPTH configure() takes */
#define MAX_LINEAR 64 /* data- attributes of one tag, pairs of one query */

/* ---- BLAKE2b, unkeyed, 8-byte digest (RFC 7693): the core's, shared ----------- */

/* hashlib.blake2b(data, digest_size=8).digest() read as a little-endian int64. */
static inline int64_t
b2_hash8(const unsigned char *data, size_t n)
{
    return (int64_t)blake2b_digest8(data, n);
}

/* ---- what configure() hands over ------------------------------------------------ */

static unsigned char ascii_space[128];
static Py_UCS4 wide_spaces[64];
static int n_wide_spaces;
static Py_UCS4 refused[16];  /* characters the reference must cut (see the top) */
static int n_refused;
static PyObject *unescape;   /* html.unescape */
static PyObject *shape;      /* fingerprint._shape */
static int configured;

static inline int
is_space(Py_UCS4 c)
{
    if (c < 128) return ascii_space[c];
    for (int i = 0; i < n_wide_spaces; i++)
        if (wide_spaces[i] == c) return 1;
    return 0;
}

static inline int
is_alpha(Py_UCS4 c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline Py_UCS4
lower(Py_UCS4 c)
{
    return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

/* ---- buffers -------------------------------------------------------------------- */

typedef struct {
    unsigned char *p;
    size_t n, cap;
} bytes_buf;

typedef struct {
    Py_UCS4 *p;
    Py_ssize_t n, cap;
} ucs_buf;

typedef struct {
    Py_UCS4 *s;
    Py_ssize_t a, b;  /* s[a:b) */
} span;

static int
bytes_reserve(bytes_buf *buf, size_t more)
{
    if (buf->n + more <= buf->cap) return 0;
    size_t cap = buf->cap ? buf->cap : 256;
    while (cap < buf->n + more) cap *= 2;
    unsigned char *p = PyMem_Realloc(buf->p, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    buf->p = p;
    buf->cap = cap;
    return 0;
}

static int
bytes_raw(bytes_buf *buf, const char *text, size_t n)
{
    if (bytes_reserve(buf, n) < 0) return -1;
    memcpy(buf->p + buf->n, text, n);
    buf->n += n;
    return 0;
}

#define bytes_ascii(buf, text) bytes_raw(buf, text, sizeof(text) - 1)

/* str(value): decimal, "-" first if negative. */
static int
bytes_int(bytes_buf *buf, int64_t value)
{
    char text[24];
    int i = (int)sizeof text;
    uint64_t u = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    do {
        text[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (value < 0) text[--i] = '-';
    return bytes_raw(buf, text + i, sizeof text - (size_t)i);
}

/* s[a:b) as UTF-8, a surrogate as its three bytes ("surrogatepass"). */
static int
bytes_utf8(bytes_buf *buf, const Py_UCS4 *s, Py_ssize_t a, Py_ssize_t b)
{
    if (b <= a) return 0;
    if (bytes_reserve(buf, (size_t)(b - a) * 4) < 0) return -1;
    unsigned char *o = buf->p + buf->n;
    for (Py_ssize_t i = a; i < b; i++) {
        Py_UCS4 c = s[i];
        if (c < 0x80) {
            *o++ = (unsigned char)c;
        } else if (c < 0x800) {
            *o++ = (unsigned char)(0xC0 | (c >> 6));
            *o++ = (unsigned char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            *o++ = (unsigned char)(0xE0 | (c >> 12));
            *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            *o++ = (unsigned char)(0x80 | (c & 0x3F));
        } else {
            *o++ = (unsigned char)(0xF0 | (c >> 18));
            *o++ = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
            *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            *o++ = (unsigned char)(0x80 | (c & 0x3F));
        }
    }
    buf->n = (size_t)(o - buf->p);
    return 0;
}

static int
ucs_reserve(ucs_buf *buf, Py_ssize_t more)
{
    if (buf->n + more <= buf->cap) return 0;
    Py_ssize_t cap = buf->cap ? buf->cap : 256;
    while (cap < buf->n + more) cap *= 2;
    Py_UCS4 *p = PyMem_Realloc(buf->p, (size_t)cap * sizeof(Py_UCS4));
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    buf->p = p;
    buf->cap = cap;
    return 0;
}

/* ---- the cutter ----------------------------------------------------------------- */

enum { KIND_SKIP, KIND_LONE, KIND_START, KIND_END, KIND_KEPT, KIND_REFUSE };

typedef struct {
    const char *w;
    Py_ssize_t n;
} word;
#define W(text) {text, (Py_ssize_t)sizeof(text) - 1}

/* What configure() hands over from fingerprint.py (lowercase ASCII words). */
#define MAX_WORDS 64
#define MAX_FIXED 16
typedef struct {
    word w[MAX_WORDS];
    int n;
} words;

static words block_tags, void_tags, hints;
static unsigned char hint_first[128];  /* the first letters of the hints */
/* The attribute names a tag's first occurrence of is kept: "class" first, then the
 * URL attributes, the name attributes and "content" (of a <meta>). */
enum { ATTR_CLASS = 1, ATTR_URL = 2, ATTR_NAME = 4, ATTR_CONTENT = 8 };
static word fixed[MAX_FIXED];
static int fixed_kind[MAX_FIXED];
static int n_fixed;
static char punct[64];  /* what _shape strips from a word's ends */
static Py_ssize_t max_blocks;
static int max_depth;

typedef struct {
    const Py_UCS4 *s;  /* the page */
    Py_ssize_t n;
    int64_t *out;      /* (pair, label, path) triples */
    Py_ssize_t nout, capout;
    bytes_buf hb;      /* what is hashed */
    ucs_buf run;       /* the text of the run being read */
    int run_amp;       /* it has a "&" */
    int64_t paths[DEPTH_CAP];
    int tags[DEPTH_CAP];
    int depth;         /* paths[0]: the root (0) */
    int refuse;        /* the reference must cut this page */
} cutter;

static int
push(cutter *c, int64_t pair, int64_t label, int64_t path)
{
    if (c->nout == c->capout) {
        Py_ssize_t cap = c->capout ? c->capout * 2 : 1024;
        int64_t *p = PyMem_Realloc(c->out, (size_t)cap * 3 * sizeof(int64_t));
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->out = p;
        c->capout = cap;
    }
    c->out[3 * c->nout] = pair;
    c->out[3 * c->nout + 1] = label;
    c->out[3 * c->nout + 2] = path;
    c->nout++;
    return 0;
}

/* The hashes of short inputs, kept from page to page (a site's pages share their
 * element paths and labels): open addressing on FNV-1a, each input compared whole;
 * emptied when its bytes pass MEMO_BYTES.  Only touched with the GIL held and no
 * call back into Python in between. */
#define MEMO_SLOTS 16384
#define MEMO_PROBES 8
#define MEMO_INPUT 160
#define MEMO_BYTES (1 << 20)

typedef struct {
    uint64_t key;
    uint32_t off, len;
    int64_t value;
} memo_slot;

static memo_slot memo[MEMO_SLOTS];
static unsigned char *memo_bytes;
static size_t memo_used;

static void
memo_clear(void)
{
    memset(memo, 0, sizeof memo);
    memo_used = 0;
}

static inline int64_t
hashed(cutter *c)
{
    const unsigned char *p = c->hb.p;
    size_t n = c->hb.n;
    if (n == 0 || n > MEMO_INPUT || memo_bytes == NULL) return b2_hash8(p, n);
    uint64_t key = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) key = (key ^ p[i]) * 0x100000001b3ULL;
    size_t at = (size_t)key & (MEMO_SLOTS - 1);
    for (int probe = 0; probe < MEMO_PROBES; probe++) {
        memo_slot *slot = &memo[(at + (size_t)probe) & (MEMO_SLOTS - 1)];
        if (slot->len == 0) {  /* free: the hash kept here */
            int64_t value = b2_hash8(p, n);
            if (memo_used + n > MEMO_BYTES) {
                memo_clear();
                return value;
            }
            memcpy(memo_bytes + memo_used, p, n);
            slot->key = key;
            slot->off = (uint32_t)memo_used;
            slot->len = (uint32_t)n;
            slot->value = value;
            memo_used += n;
            return value;
        }
        if (slot->key == key && slot->len == n && memcmp(memo_bytes + slot->off, p, n) == 0)
            return slot->value;
    }
    return b2_hash8(p, n);
}

/* s[a:b) equals the ASCII word w (n characters), letters compared in lowercase. */
static inline int
ascii_eq(const Py_UCS4 *s, Py_ssize_t a, Py_ssize_t b, const char *w, Py_ssize_t n)
{
    if (b - a != n) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (lower(s[a + i]) != (Py_UCS4)(unsigned char)w[i]) return 0;
    return 1;
}

#define EQ(s, a, b, text) ascii_eq(s, a, b, text, (Py_ssize_t)sizeof(text) - 1)

static int
find_tag(const words *table, const Py_UCS4 *s, Py_ssize_t a, Py_ssize_t b)
{
    Py_UCS4 first = lower(s[a]);
    for (int i = 0; i < table->n; i++)
        if ((Py_UCS4)(unsigned char)table->w[i].w[0] == first
            && ascii_eq(s, a, b, table->w[i].w, table->w[i].n))
            return i;
    return -1;
}

/* A Python str of s[a:b) (UTF-32 in this machine's order, surrogates passed). */
static PyObject *
to_str(const Py_UCS4 *s, Py_ssize_t a, Py_ssize_t b)
{
    const int probe = 1;
    int order = *(const char *)&probe ? -1 : 1;
    return PyUnicode_DecodeUTF32((const char *)(s + a), (b - a) * 4, "surrogatepass", &order);
}

/* f(s[a:b)) as a fresh UCS4 copy (PyMem_Free it), its length in *n. */
static Py_UCS4 *
call_text(PyObject *f, const Py_UCS4 *s, Py_ssize_t a, Py_ssize_t b, Py_ssize_t *n)
{
    PyObject *arg = to_str(s, a, b);
    if (arg == NULL) return NULL;
    PyObject *res = PyObject_CallFunctionObjArgs(f, arg, NULL);
    Py_DECREF(arg);
    if (res == NULL) return NULL;
    if (!PyUnicode_Check(res)) {
        Py_DECREF(res);
        PyErr_SetString(PyExc_TypeError, "a configured function gave no str");
        return NULL;
    }
    *n = PyUnicode_GetLength(res);
    Py_UCS4 *copy = PyUnicode_AsUCS4Copy(res);
    Py_DECREF(res);
    return copy;
}

/* The shape of the word s[a:b) (fingerprint._shape) appended to the hash input. */
static int
add_shape(cutter *c, const Py_UCS4 *s, Py_ssize_t a, Py_ssize_t b)
{
    for (Py_ssize_t i = a; i < b; i++) {
        if (s[i] >= 0x80) {  /* Unicode case rules: the reference's own function */
            Py_ssize_t n;
            Py_UCS4 *got = call_text(shape, s, a, b, &n);
            if (got == NULL) return -1;
            int rc = bytes_utf8(&c->hb, got, 0, n);
            PyMem_Free(got);
            return rc;
        }
    }
    while (a < b && strchr(punct, (int)s[a]) != NULL && s[a] != 0) a++;
    while (b > a && strchr(punct, (int)s[b - 1]) != NULL && s[b - 1] != 0) b--;
    int ok = a < b && b - a <= 15;
    int all_lower = 1, all_upper = 1, title = 1;
    for (Py_ssize_t i = a; ok && i < b; i++) {
        Py_UCS4 ch = s[i];
        if (!is_alpha(ch)) {
            ok = 0;
            break;
        }
        int up = ch >= 'A' && ch <= 'Z';
        if (up) all_lower = 0;
        else all_upper = 0;
        if ((i == a) != up) title = 0;
    }
    if (!ok || !(all_lower || all_upper || title)) return bytes_ascii(&c->hb, "#");
    if (bytes_reserve(&c->hb, (size_t)(b - a)) < 0) return -1;
    for (Py_ssize_t i = a; i < b; i++) c->hb.p[c->hb.n++] = (unsigned char)lower(s[i]);
    return 0;
}

/* _Blocks.run: one run of text (its "&" unescaped first). */
static int
run_text(cutter *c, const Py_UCS4 *t, Py_ssize_t n)
{
    Py_ssize_t w0a = -1, w0b = -1, w1a = -1, w1b = -1, i = 0;
    while (i < n && is_space(t[i])) i++;
    if (i == n) return 0;
    /* the pair: "\x1f" and the words joined by one space */
    c->hb.n = 0;
    if (bytes_ascii(&c->hb, "\x1f") < 0) return -1;
    int words = 0;
    while (i < n) {
        Py_ssize_t a = i;
        while (i < n && !is_space(t[i])) i++;
        if (words == 0) {
            w0a = a;
            w0b = i;
        } else {
            if (words == 1) {
                w1a = a;
                w1b = i;
            }
            if (bytes_ascii(&c->hb, " ") < 0) return -1;
        }
        if (bytes_utf8(&c->hb, t, a, i) < 0) return -1;
        words++;
        while (i < n && is_space(t[i])) i++;
    }
    int64_t pair = hashed(c);
    int64_t path = c->paths[c->depth - 1];
    c->hb.n = 0;
    if (bytes_ascii(&c->hb, "\x1f") < 0 || add_shape(c, t, w0a, w0b) < 0) return -1;
    if (c->hb.n == 2 && c->hb.p[1] == '#') {  /* led by a number or token: by its place */
        c->hb.n = 0;
        if (bytes_int(&c->hb, path) < 0 || bytes_ascii(&c->hb, "\x1f#\x1f") < 0) return -1;
        if (words > 1 && add_shape(c, t, w1a, w1b) < 0) return -1;
    }
    return push(c, pair, hashed(c), path);
}

static int
flush_run(cutter *c)
{
    int rc;
    if (c->run_amp) {
        Py_ssize_t n;
        Py_UCS4 *text = call_text(unescape, c->run.p, 0, c->run.n, &n);
        if (text == NULL) return -1;
        rc = run_text(c, text, n);
        PyMem_Free(text);
    } else {
        rc = run_text(c, c->run.p, c->run.n);
    }
    c->run.n = 0;
    c->run_amp = 0;
    return rc;
}

/* One more text of the run (the texts of a run are joined by a space). */
static int
add_text(cutter *c, Py_ssize_t a, Py_ssize_t b, int first)
{
    if (ucs_reserve(&c->run, (b - a) + 1) < 0) return -1;
    if (!first) c->run.p[c->run.n++] = ' ';
    for (Py_ssize_t i = a; i < b; i++) {
        if (c->s[i] == '&') c->run_amp = 1;
        c->run.p[c->run.n++] = c->s[i];
    }
    return 0;
}

/* _KEPT_HINT_RE.search(s[a:b)): a kept attribute's name, spaces, "=". */
static int
hinted(const Py_UCS4 *s, Py_ssize_t a, Py_ssize_t b)
{
    for (Py_ssize_t i = a; i < b; i++) {
        Py_UCS4 first = lower(s[i]);
        if (first >= 128 || !hint_first[first]) continue;
        for (int k = 0; k < hints.n; k++) {
            Py_ssize_t len = hints.w[k].n;
            if ((Py_UCS4)(unsigned char)hints.w[k].w[0] != first || i + len > b
                || !ascii_eq(s, i, i + len, hints.w[k].w, len))
                continue;
            Py_ssize_t j = i + len;
            while (j < b && is_space(s[j])) j++;
            if (j < b && s[j] == '=') return 1;
        }
    }
    return 0;
}

/* What a "<" followed by s[a:b) and ">" is (_kind); the tag's name and attributes. */
static int
kind_of(cutter *c, Py_ssize_t a, Py_ssize_t b, int *tag, Py_ssize_t *na, Py_ssize_t *nb)
{
    const Py_UCS4 *s = c->s;
    Py_ssize_t i = a;
    int slash = 0;
    if (i + 1 < b && s[i] == '/' && is_alpha(s[i + 1])) {
        slash = 1;
        i++;
    }
    if (i < b && is_alpha(s[i])) {
        Py_ssize_t start = i;
        while (i < b && !is_space(s[i]) && s[i] != '/') {
            if (s[i] >= 0x80) return KIND_REFUSE;  /* str.lower's Unicode rules */
            i++;
        }
        *na = start;
        *nb = i;
        *tag = find_tag(&block_tags, s, start, i);
        if (*tag >= 0) return slash ? KIND_END : KIND_START;
        if (!slash && i < b && hinted(s, i, b)) return KIND_KEPT;
        return KIND_SKIP;
    }
    if (a < b && (s[a] == '!' || s[a] == '?' || s[a] == '/')) return KIND_SKIP;
    return KIND_LONE;
}

typedef struct {
    Py_ssize_t na, nb, va, vb;  /* name s[na:nb), ASCII; value s[va:vb) */
    int kind;                   /* ATTR_* (0: a data- attribute) */
} attr;

static inline int
name_char(Py_UCS4 ch)
{
    return !is_space(ch) && ch != '"' && ch != '\'' && ch != '<' && ch != '>' && ch != '/'
           && ch != '=';
}

static int
starts_data(const Py_UCS4 *s, Py_ssize_t a, Py_ssize_t b)
{
    return b - a >= 5 && EQ(s, a, a + 5, "data-");
}

static int
has_char(const Py_UCS4 *s, Py_ssize_t a, Py_ssize_t b, Py_UCS4 ch)
{
    for (Py_ssize_t i = a; i < b; i++)
        if (s[i] == ch) return 1;
    return 0;
}

/* The hash input gets an attribute name (lowercase). */
static int
add_name(cutter *c, const attr *at)
{
    if (bytes_reserve(&c->hb, (size_t)(at->nb - at->na)) < 0) return -1;
    for (Py_ssize_t i = at->na; i < at->nb; i++)
        c->hb.p[c->hb.n++] = (unsigned char)lower(c->s[i]);
    return 0;
}

static int
cmp_span(const void *x, const void *y)
{
    const span *p = x, *q = y;
    Py_ssize_t n = p->b - p->a < q->b - q->a ? p->b - p->a : q->b - q->a;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 u = p->s[p->a + i], v = q->s[q->a + i];
        if (u != v) return u < v ? -1 : 1;
    }
    Py_ssize_t lp = p->b - p->a, lq = q->b - q->a;
    return lp < lq ? -1 : (lp > lq ? 1 : 0);
}

/* The hash input gets the class names of s[a:b) kept in a path: sorted, joined by ".". */
static int
add_classes(cutter *c, Py_ssize_t a, Py_ssize_t b)
{
    const Py_UCS4 *s = c->s;
    span *names = NULL;
    Py_ssize_t n = 0, cap = 0;
    Py_ssize_t i = a;
    int rc = 0;
    while (i < b) {
        while (i < b && is_space(s[i])) i++;
        if (i == b) break;
        Py_ssize_t start = i;
        int ok = 1;
        while (i < b && !is_space(s[i])) {
            Py_UCS4 ch = s[i];
            if (!(is_alpha(ch) || ch == '_' || ch == '-')) ok = 0;
            i++;
        }
        if (!ok) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            span *p = PyMem_Realloc(names, (size_t)cap * sizeof(span));
            if (p == NULL) {
                PyMem_Free(names);
                PyErr_NoMemory();
                return -1;
            }
            names = p;
        }
        names[n].s = (Py_UCS4 *)s;
        names[n].a = start;
        names[n].b = i;
        n++;
    }
    if (n > 1) qsort(names, (size_t)n, sizeof(span), cmp_span);
    for (Py_ssize_t k = 0; k < n && rc == 0; k++) {
        if (k && bytes_ascii(&c->hb, ".") < 0) rc = -1;
        else rc = bytes_utf8(&c->hb, s, names[k].a, names[k].b);
    }
    PyMem_Free(names);
    return rc;
}

/* An attribute's value as text, its "&" unescaped (html.unescape): v[a:b), in the
 * page or in *own* (a copy to PyMem_Free; NULL if none was made). */
static int
value_text(cutter *c, const attr *at, Py_UCS4 **own, const Py_UCS4 **v, Py_ssize_t *a,
           Py_ssize_t *b)
{
    *own = NULL;
    *v = c->s;
    *a = at->va;
    *b = at->vb;
    if (!has_char(c->s, at->va, at->vb, '&')) return 0;
    Py_ssize_t n;
    *own = call_text(unescape, c->s, at->va, at->vb, &n);
    if (*own == NULL) return -1;
    *v = *own;
    *a = 0;
    *b = n;
    return 0;
}

/* _Blocks.url: an outlink's path and one block per query pair (a repeated pair once). */
static int
add_url(cutter *c, int64_t path, const attr *at)
{
    Py_UCS4 *own = NULL;
    const Py_UCS4 *v;
    Py_ssize_t a, b;
    int rc = -1;
    if (value_text(c, at, &own, &v, &a, &b) < 0) return -1;
    while (a < b && is_space(v[a])) a++;
    while (b > a && is_space(v[b - 1])) b--;
    for (Py_ssize_t i = a; i < b; i++)
        if (v[i] == '#') {
            b = i;
            break;
        }
    Py_ssize_t q = b;
    for (Py_ssize_t i = a; i < b; i++)
        if (v[i] == '?') {
            q = i;
            break;
        }
    /* the pairs: at most MAX_LINEAR distinct ones compared one by one */
    span pairs[MAX_LINEAR];
    int npairs = 0;
    if (q < b && q + 1 < b) {
        Py_ssize_t i = q + 1;
        while (1) {
            Py_ssize_t start = i;
            while (i < b && v[i] != '&') i++;
            span p = {(Py_UCS4 *)v, start, i};
            int seen = 0;
            for (int k = 0; k < npairs && !seen; k++)
                seen = cmp_span(&pairs[k], &p) == 0;
            if (!seen) {
                if (npairs == MAX_LINEAR) {
                    c->refuse = 1;
                    rc = 0;
                    goto done;
                }
                pairs[npairs++] = p;
            }
            if (i == b) break;
            i++;
        }
    }
    c->hb.n = 0;
    if (bytes_int(&c->hb, path) < 0 || bytes_ascii(&c->hb, "\x1f") < 0 || add_name(c, at) < 0)
        goto done;
    int64_t label = hashed(c);
    c->hb.n = 0;
    if (bytes_ascii(&c->hb, "@\x1f") < 0 || bytes_utf8(&c->hb, v, a, q) < 0) goto done;
    if (push(c, hashed(c), label, label) < 0) goto done;
    for (int k = 0; k < npairs; k++) {
        Py_ssize_t pa = pairs[k].a, pb = pairs[k].b, eq = pb;
        for (Py_ssize_t i = pa; i < pb; i++)
            if (v[i] == '=') {
                eq = i;
                break;
            }
        c->hb.n = 0;
        if (bytes_int(&c->hb, label) < 0 || bytes_ascii(&c->hb, "\x1f") < 0
            || bytes_utf8(&c->hb, v, pa, eq) < 0)
            goto done;
        int64_t sub = hashed(c);
        c->hb.n = 0;
        if (bytes_ascii(&c->hb, "?\x1f") < 0 || bytes_utf8(&c->hb, v, pa, eq) < 0
            || bytes_ascii(&c->hb, "\x1f") < 0
            || bytes_utf8(&c->hb, v, eq < pb ? eq + 1 : pb, pb) < 0)
            goto done;
        if (push(c, hashed(c), sub, sub) < 0) goto done;
    }
    rc = 0;
done:
    PyMem_Free(own);
    return rc;
}

/* A name kept from an attribute (title, alt, data-*, a meta's content): its words. */
static int
add_named(cutter *c, int64_t path, const attr *at)
{
    Py_UCS4 *own = NULL;
    const Py_UCS4 *v;
    Py_ssize_t a, b;
    if (value_text(c, at, &own, &v, &a, &b) < 0) return -1;
    int rc = -1;
    c->hb.n = 0;
    if (add_name(c, at) < 0 || bytes_ascii(&c->hb, "\x1f") < 0) goto done;
    size_t before = c->hb.n;
    Py_ssize_t i = a;
    while (i < b) {
        while (i < b && is_space(v[i])) i++;
        if (i == b) break;
        Py_ssize_t start = i;
        while (i < b && !is_space(v[i])) i++;
        if (c->hb.n > before && bytes_ascii(&c->hb, " ") < 0) goto done;
        if (bytes_utf8(&c->hb, v, start, i) < 0) goto done;
    }
    if (c->hb.n == before) {  /* no word */
        rc = 0;
        goto done;
    }
    int64_t pair = hashed(c);
    c->hb.n = 0;
    if (bytes_int(&c->hb, path) < 0 || bytes_ascii(&c->hb, "\x1f") < 0 || add_name(c, at) < 0)
        goto done;
    int64_t label = hashed(c);
    rc = push(c, pair, label, label);
done:
    PyMem_Free(own);
    return rc;
}

/* _Blocks.start and element: a tag's path, its kept attributes' blocks, the stack. */
static int
start_tag(cutter *c, int tag, Py_ssize_t na, Py_ssize_t nb, Py_ssize_t aa, Py_ssize_t ab,
          int block)
{
    const Py_UCS4 *s = c->s;
    /* the attributes, as _ATTR_RE.findall reads them; the first of each name kept */
    attr kept[MAX_FIXED + MAX_LINEAR];
    int nkept = 0, ndata = 0;
    unsigned seen = 0;
    attr cls = {0, 0, 0, 0, 0};
    int has_cls = 0;
    Py_ssize_t i = aa;
    while (i < ab) {
        if (!name_char(s[i])) {
            i++;
            continue;
        }
        attr at;
        at.na = i;
        at.kind = 0;
        int ascii = 1;
        while (i < ab && name_char(s[i])) {
            if (s[i] >= 0x80) ascii = 0;
            i++;
        }
        at.nb = i;
        at.va = at.vb = i;
        Py_ssize_t j = i;
        while (j < ab && is_space(s[j])) j++;
        if (j < ab && s[j] == '=') {
            j++;
            while (j < ab && is_space(s[j])) j++;
            Py_ssize_t close = -1;
            if (j < ab && (s[j] == '"' || s[j] == '\'')) {
                for (Py_ssize_t k = j + 1; k < ab; k++)
                    if (s[k] == s[j]) {
                        close = k;
                        break;
                    }
            }
            if (close >= 0) {
                at.va = j + 1;
                at.vb = close;
                i = close + 1;
            } else {  /* bare: to a space (or the end) */
                Py_ssize_t k = j;
                while (k < ab && !is_space(s[k])) k++;
                at.va = j;
                at.vb = k;
                i = k;
            }
        }
        if (!ascii) {
            if (starts_data(s, at.na, at.nb)) {  /* its lowercase: str.lower's rules */
                c->refuse = 1;
                return 0;
            }
            continue;  /* no name the cutter keeps */
        }
        int f = -1;
        for (int k = 0; k < n_fixed; k++)
            if (ascii_eq(s, at.na, at.nb, fixed[k].w, fixed[k].n)) {
                f = k;
                break;
            }
        if (f >= 0) {
            if (seen & (1u << f)) continue;
            seen |= 1u << f;
            at.kind = fixed_kind[f];
            if (at.kind & ATTR_CLASS) {
                cls = at;
                has_cls = 1;
                continue;
            }
            kept[nkept++] = at;
        } else if (starts_data(s, at.na, at.nb)) {
            int dup = 0;
            for (int k = 0; k < nkept && !dup; k++) {
                const attr *o = &kept[k];
                if (o->nb - o->na != at.nb - at.na) continue;
                dup = 1;
                for (Py_ssize_t m = 0; m < at.nb - at.na; m++)
                    if (lower(s[o->na + m]) != lower(s[at.na + m])) {
                        dup = 0;
                        break;
                    }
            }
            if (dup) continue;
            if (ndata == MAX_LINEAR) {
                c->refuse = 1;
                return 0;
            }
            ndata++;
            kept[nkept++] = at;
        }
    }
    int64_t parent = c->paths[c->depth - 1];
    c->hb.n = 0;
    if (bytes_int(&c->hb, parent) < 0 || bytes_ascii(&c->hb, "\x1f") < 0) return -1;
    if (bytes_reserve(&c->hb, (size_t)(nb - na)) < 0) return -1;
    for (Py_ssize_t k = na; k < nb; k++) c->hb.p[c->hb.n++] = (unsigned char)lower(s[k]);
    if (block) {
        if (bytes_ascii(&c->hb, "\x1f") < 0) return -1;
        if (has_cls && add_classes(c, cls.va, cls.vb) < 0) return -1;
    }
    int64_t path = hashed(c);
    int meta = EQ(s, na, nb, "meta");
    for (int k = 0; k < nkept; k++) {
        const attr *at = &kept[k];
        int data = starts_data(s, at->na, at->nb);
        int rc = 0;
        if ((at->kind & ATTR_URL)
            || (data && (has_char(s, at->va, at->vb, '/') || has_char(s, at->va, at->vb, '.'))))
            rc = add_url(c, path, at);
        else if (data || (at->kind & ATTR_NAME) || (meta && (at->kind & ATTR_CONTENT)))
            rc = add_named(c, path, at);
        if (rc < 0) return -1;
        if (c->refuse || c->nout > max_blocks) return 0;
    }
    if (block && tag >= 0 && find_tag(&void_tags, s, na, nb) < 0 && c->depth < max_depth) {
        c->paths[c->depth] = path;
        c->tags[c->depth] = tag;
        c->depth++;
    }
    return 0;
}

static void
end_tag(cutter *c, int tag)
{
    for (int i = c->depth - 1; i > 0; i--)
        if (c->tags[i] == tag) {
            c->depth = i;
            return;
        }
}

/* _Blocks.markup over s[0:n): 0, or -1 with an exception set. */
static int
cut_markup(cutter *c)
{
    const Py_UCS4 *s = c->s;
    Py_ssize_t n = c->n, i = 0;
    while (i < n && s[i] != '<') i++;
    if (add_text(c, 0, i, 1) < 0) return -1;
    while (i < n) {  /* s[i] == "<" */
        Py_ssize_t part = i + 1, next = part, gt = -1;
        while (next < n && s[next] != '<') {
            if (gt < 0 && s[next] == '>') gt = next;
            next++;
        }
        int kind = KIND_LONE, tag = -1;
        Py_ssize_t na = 0, nb = 0;
        if (gt >= 0) kind = kind_of(c, part, gt, &tag, &na, &nb);
        if (kind == KIND_REFUSE) {
            c->refuse = 1;
            return 0;
        }
        if (kind == KIND_START || kind == KIND_END) {
            if (flush_run(c) < 0) return -1;
            if (kind == KIND_END) end_tag(c, tag);
            else if (start_tag(c, tag, na, nb, nb, gt, 1) < 0) return -1;
            if (add_text(c, gt + 1, next, 1) < 0) return -1;
        } else if (kind == KIND_KEPT) {
            if (start_tag(c, -1, na, nb, nb, gt, 0) < 0) return -1;
            if (add_text(c, gt + 1, next, 0) < 0) return -1;
        } else if (kind == KIND_SKIP) {
            if (add_text(c, gt + 1, next, 0) < 0) return -1;
        } else if (add_text(c, part, next, 0) < 0) {  /* the "<" alone */
            return -1;
        }
        if (c->refuse || c->nout > max_blocks) return 0;
        i = next;
    }
    return flush_run(c);
}

static const int64_t *sort_out;  /* what by_block compares (the GIL is held) */

static int
by_block(const void *x, const void *y)
{
    int64_t i = *(const int64_t *)x, j = *(const int64_t *)y;
    const int64_t *p = sort_out + 3 * i, *q = sort_out + 3 * j;
    for (int k = 0; k < 3; k++)
        if (p[k] != q[k]) return p[k] < q[k] ? -1 : 1;
    return i < j ? -1 : (i > j ? 1 : 0);
}

/* Fingerprint.of_blocks's arrays (the first MAX_BLOCKS blocks sorted by (pair, label,
 * path), then where each stood), one after the other, native int64. */
static PyObject *
sorted_blocks(cutter *c)
{
    Py_ssize_t n = c->nout < max_blocks ? c->nout : max_blocks;
    PyObject *result = PyBytes_FromStringAndSize(NULL, 4 * n * (Py_ssize_t)sizeof(int64_t));
    if (result == NULL || n == 0) return result;
    int64_t *dst = (int64_t *)PyBytes_AsString(result);
    int64_t *places = dst + 3 * n;
    for (Py_ssize_t i = 0; i < n; i++) places[i] = i;
    sort_out = c->out;
    qsort(places, (size_t)n, sizeof(int64_t), by_block);
    for (Py_ssize_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) dst[k * n + i] = c->out[3 * places[i] + k];
    return result;
}

static PyObject *
cut(PyObject *self, PyObject *arg)
{
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "_blocks.configure() was not called");
        return NULL;
    }
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "cut() takes a str");
        return NULL;
    }
    cutter c;
    memset(&c, 0, sizeof c);
    c.n = PyUnicode_GetLength(arg);
    Py_UCS4 *s = PyUnicode_AsUCS4Copy(arg);
    if (s == NULL) return NULL;
    c.s = s;
    for (Py_ssize_t i = 0; i < c.n && !c.refuse; i++)
        if (s[i] >= 0x80)
            for (int k = 0; k < n_refused; k++)
                if (s[i] == refused[k]) c.refuse = 1;
    c.depth = 1;
    c.paths[0] = 0;
    c.tags[0] = -1;
    PyObject *result = NULL;
    if (c.refuse || cut_markup(&c) == 0) {
        if (c.refuse) {
            result = Py_NewRef(Py_None);
        } else {
            result = sorted_blocks(&c);
        }
    }
    PyMem_Free(s);
    PyMem_Free(c.out);
    PyMem_Free(c.hb.p);
    PyMem_Free(c.run.p);
    return result;
}

/* *table* from a tuple of lowercase ASCII str (kept for good: configure() runs once). */
static int
set_words(words *table, PyObject *tuple, const char *what)
{
    if (!PyTuple_Check(tuple) || PyTuple_Size(tuple) > MAX_WORDS) {
        PyErr_Format(PyExc_ValueError, "configure(): %s: a tuple of at most %d str", what,
                     MAX_WORDS);
        return -1;
    }
    table->n = 0;
    for (Py_ssize_t i = 0; i < PyTuple_Size(tuple); i++) {
        PyObject *item = PyTuple_GetItem(tuple, i);
        Py_ssize_t n;
        const char *text = item != NULL && PyUnicode_Check(item)
                               ? PyUnicode_AsUTF8AndSize(item, &n) : NULL;
        if (text == NULL || n == 0 || (size_t)n != strlen(text)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "configure(): %s: not a word", what);
            return -1;
        }
        for (Py_ssize_t k = 0; k < n; k++)
            if ((unsigned char)text[k] >= 0x80 || (text[k] >= 'A' && text[k] <= 'Z')) {
                PyErr_Format(PyExc_ValueError, "configure(): %s: not lowercase ASCII", what);
                return -1;
            }
        char *copy = PyMem_Malloc((size_t)n + 1);
        if (copy == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(copy, text, (size_t)n + 1);
        table->w[table->n].w = copy;
        table->w[table->n].n = n;
        table->n++;
    }
    return 0;
}

/* One more name whose first occurrence in a tag is kept, of *kind* (ATTR_*). */
static int
add_fixed(const word *name, int kind)
{
    for (int k = 0; k < n_fixed; k++)
        if (fixed[k].n == name->n && memcmp(fixed[k].w, name->w, (size_t)name->n) == 0) {
            fixed_kind[k] |= kind;
            return 0;
        }
    if (n_fixed == MAX_FIXED) {
        PyErr_SetString(PyExc_ValueError, "configure(): too many attribute names");
        return -1;
    }
    fixed[n_fixed] = *name;
    fixed_kind[n_fixed++] = kind;
    return 0;
}

static PyObject *
configure(PyObject *self, PyObject *args)
{
    PyObject *spaces, *refuse, *unescape_f, *shape_f, *blocks_t, *voids_t, *hints_t;
    PyObject *urls_t, *names_t, *punct_s;
    Py_ssize_t limit_blocks;
    int limit_depth;
    static const word class_word = W("class"), content_word = W("content");
    (void)self;
    if (!PyArg_ParseTuple(args, "UUOOOOOOOUni:configure", &spaces, &refuse, &unescape_f,
                          &shape_f, &blocks_t, &voids_t, &hints_t, &urls_t, &names_t,
                          &punct_s, &limit_blocks, &limit_depth))
        return NULL;
    Py_ssize_t ns = PyUnicode_GetLength(spaces), nr = PyUnicode_GetLength(refuse);
    Py_ssize_t np;
    const char *p = PyUnicode_AsUTF8AndSize(punct_s, &np);
    if (p == NULL) return NULL;
    if (ns > 64 || nr > 16 || np >= (Py_ssize_t)sizeof punct || (size_t)np != strlen(p)
        || limit_blocks < 1 || limit_depth < 1 || limit_depth > DEPTH_CAP) {
        PyErr_SetString(PyExc_ValueError, "configure(): out of bounds");
        return NULL;
    }
    words urls, names;
    if (set_words(&block_tags, blocks_t, "block tags") < 0
        || set_words(&void_tags, voids_t, "void tags") < 0
        || set_words(&hints, hints_t, "hints") < 0
        || set_words(&urls, urls_t, "URL attributes") < 0
        || set_words(&names, names_t, "name attributes") < 0)
        return NULL;
    n_fixed = 0;
    if (add_fixed(&class_word, ATTR_CLASS) < 0) return NULL;
    for (int k = 0; k < urls.n; k++)
        if (add_fixed(&urls.w[k], ATTR_URL) < 0) return NULL;
    for (int k = 0; k < names.n; k++)
        if (add_fixed(&names.w[k], ATTR_NAME) < 0) return NULL;
    if (add_fixed(&content_word, ATTR_CONTENT) < 0) return NULL;
    memset(hint_first, 0, sizeof hint_first);
    for (int k = 0; k < hints.n; k++) hint_first[(unsigned char)hints.w[k].w[0]] = 1;
    memcpy(punct, p, (size_t)np + 1);
    max_blocks = limit_blocks;
    max_depth = limit_depth;
    memset(ascii_space, 0, sizeof ascii_space);
    n_wide_spaces = 0;
    for (Py_ssize_t i = 0; i < ns; i++) {
        Py_UCS4 ch = PyUnicode_ReadChar(spaces, i);
        if (ch < 128) ascii_space[ch] = 1;
        else wide_spaces[n_wide_spaces++] = ch;
    }
    n_refused = 0;
    for (Py_ssize_t i = 0; i < nr; i++) refused[n_refused++] = PyUnicode_ReadChar(refuse, i);
    if (memo_bytes == NULL && (memo_bytes = PyMem_Malloc(MEMO_BYTES)) == NULL)
        return PyErr_NoMemory();
    memo_clear();
    PyObject *old_unescape = unescape, *old_shape = shape;
    unescape = Py_NewRef(unescape_f);
    shape = Py_NewRef(shape_f);
    Py_XDECREF(old_unescape);
    Py_XDECREF(old_shape);
    configured = 1;
    Py_RETURN_NONE;
}

static PyObject *
hash8(PyObject *self, PyObject *arg)
{
    char *data;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(arg, &data, &n) < 0) return NULL;
    return PyLong_FromLongLong((long long)b2_hash8((const unsigned char *)data, (size_t)n));
}

static PyMethodDef methods[] = {
    {"cut", cut, METH_O,
     "cut(markup) -> bytes | None: the four arrays of Fingerprint.of_blocks(_Blocks.markup's "
     "first MAX_BLOCKS blocks), native int64, or None where the reference must cut the page."},
    {"configure", configure, METH_VARARGS,
     "configure(spaces, refused, unescape, shape, block_tags, void_tags, hints, url_attrs, "
     "name_attrs, punctuation, max_blocks, max_depth): the definitions cut() follows."},
    {"hash8", hash8, METH_O, "hash8(data) -> int: blake2b(data, digest_size=8) as int64 LE."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_blocks", "The page fingerprint's block cutter in C (optional).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__blocks(void)
{
    return PyModule_Create(&module);
}
