/* The IRI path in C: an IRI mapped to its URI (RFC 3987 section 3.1), for the ladder's fast path.
 *
 * iri_to_uri(text) gives what iri_scrapy.core.mapping.iri_to_uri gives -- step 2: the UTF-8
 * octets of every non-ASCII character of the path, query and fragment as "%HH", uppercase
 * hex; the reg-name of a scheme known to use DNS converted with UTS 46 ToASCII, label by
 * label -- or None, and then the Python reference answers (None too for an ASCII text,
 * which is its own URI).  The ladder hands the URI to
 * fast_path (_fastpath.c), which says whether it is canonical; so an IRI whose URI is
 * already canonical is answered without Python (iri_scrapy.core.native, docs/benchmarks.md).
 *
 * It answers only the plain case and never refuses: whatever is not plain (an ASCII
 * character the fast path's class for its component does not hold, a label that UTS 46
 * would refuse, or map to a full stop or to ASCII alone, a rule it does not apply) gives
 * None, and the Python reference decides, raising its error if there is one.  It holds no
 * rule of its own but Punycode (RFC 3492, tested equal to Python's codec): the character
 * classes and DNS schemes are handed to configure_iri() by native.py; each code point's
 * UTS 46 mapping and flags are asked once of hosts.code_point_facts (idna's tables, the
 * authority) and kept in a table (clear_iri() empties it); NFC (UTS 46 section 4 step 2)
 * and CheckBidi (RFC 5893) are Python's own functions, called back.
 * Compiled into the _fastpath extension (setup.py), stable ABI only.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The flags of hosts.code_point_facts (FACT_MARK, FACT_RTL, FACT_CONTEXT); KNOWN: asked. */
enum { F_MARK = 1, F_RTL = 2, F_CONTEXT = 4, F_KNOWN = 0x80 };
/* A code point's mapping: an offset in the pool, or one of these. */
enum { MAP_SELF = -1, MAP_NONE = -2 /* disallowed, or more than the C path takes */ };

typedef struct {
    int32_t start;  /* offset of the replacement in pool, MAP_SELF or MAP_NONE */
    uint8_t len;    /* of the replacement, in code points */
    uint8_t flags;
} cp_facts;

#define PAGE_BITS 8
#define PAGE_SIZE (1 << PAGE_BITS)
#define N_PAGES (0x110000 >> PAGE_BITS)
/* RFC 1034 section 3.1 / UTS 46 VerifyDnsLength: 63 octets a label, 253 a name. */
#define MAX_LABEL 63
#define MAX_NAME 253

static cp_facts *pages[N_PAGES];
static Py_UCS4 *pool;
static size_t pool_len, pool_cap;

static unsigned char classes[128];
static unsigned char bit_scheme_first, bit_scheme, bit_host, bit_path, bit_query;
static PyObject *dns_schemes;  /* frozenset of str */
static PyObject *describe;     /* hosts.code_point_facts */
static PyObject *is_normalized, *nfc_form;  /* unicodedata.is_normalized, "NFC" */
static PyObject *check_bidi;   /* idna.check_bidi */
static int iri_configured;

static int
in_class(unsigned char c, unsigned char bit)
{
    return c < 128 && (classes[c] & bit);
}

/* --- per code point facts, asked of Python once ----------------------------------- */

static int
pool_add(PyObject *text, cp_facts *f)
{
    Py_ssize_t len = PyUnicode_GetLength(text);
    if (len < 0) return -1;
    if (len == 0 || len > 255) {  /* ignored (UTS 46 status I), or unusually long: Python */
        f->start = MAP_NONE;
        return 0;
    }
    if (pool_len + (size_t)len > pool_cap) {
        size_t cap = pool_cap ? pool_cap * 2 : 4096;
        while (cap < pool_len + (size_t)len) cap *= 2;
        Py_UCS4 *grown = PyMem_Realloc(pool, cap * sizeof *pool);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        pool = grown;
        pool_cap = cap;
    }
    Py_UCS4 *chars = PyUnicode_AsUCS4Copy(text);
    if (chars == NULL) return -1;
    memcpy(pool + pool_len, chars, (size_t)len * sizeof *pool);
    PyMem_Free(chars);
    f->start = (int32_t)pool_len;
    f->len = (uint8_t)len;
    pool_len += (size_t)len;
    return 0;
}

/* Ask hosts.code_point_facts about cp: 0, or -1 on a Python error. */
static int
ask_facts(Py_UCS4 cp, cp_facts *f)
{
    PyObject *arg = PyLong_FromUnsignedLong(cp);
    if (arg == NULL) return -1;
    PyObject *res = PyObject_CallFunctionObjArgs(describe, arg, NULL);
    Py_DECREF(arg);
    if (res == NULL) return -1;
    int ok = 0;
    f->start = MAP_NONE;
    f->len = 0;
    f->flags = F_KNOWN;
    if (res != Py_None) {
        PyObject *mapped, *flags;
        long bits = -1;
        ok = PyArg_ParseTuple(res, "OO", &mapped, &flags) ? 0 : -1;
        if (ok == 0 && (bits = PyLong_AsLong(flags)) == -1 && PyErr_Occurred()) ok = -1;
        if (ok == 0) {
            f->flags |= (uint8_t)(bits & 0x7f);
            if (mapped == Py_None) f->start = MAP_SELF;
            else ok = pool_add(mapped, f);
        }
    }
    Py_DECREF(res);
    return ok;
}

/* The facts of cp, asked of Python the first time; NULL on a Python error.  The page is
 * looked up after the call: Python code may have run clear_iri() meanwhile. */
static const cp_facts *
facts_of(Py_UCS4 cp)
{
    cp_facts *page = pages[cp >> PAGE_BITS];
    size_t at = cp & (PAGE_SIZE - 1);
    if (page != NULL && (page[at].flags & F_KNOWN)) return &page[at];
    cp_facts got;
    if (ask_facts(cp, &got) < 0) return NULL;
    page = pages[cp >> PAGE_BITS];
    if (page == NULL) {
        page = PyMem_Calloc(PAGE_SIZE, sizeof *page);
        if (page == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        pages[cp >> PAGE_BITS] = page;
    }
    page[at] = got;
    return &page[at];
}

/* --- Punycode (RFC 3492) ------------------------------------------------------------ */

/* The parameter values for IDNA (RFC 3492 section 5). */
enum { BASE = 36, TMIN = 1, TMAX = 26, SKEW = 38, DAMP = 700, INITIAL_BIAS = 72, INITIAL_N = 128 };

/* Bias adaptation (RFC 3492 section 6.1). */
static uint64_t
adapt(uint64_t delta, uint64_t numpoints, int firsttime)
{
    delta = firsttime ? delta / DAMP : delta / 2;
    delta += delta / numpoints;
    uint64_t k = 0;
    while (delta > ((BASE - TMIN) * TMAX) / 2) {
        delta /= BASE - TMIN;
        k += BASE;
    }
    return k + (BASE - TMIN + 1) * delta / (delta + SKEW);
}

/* The basic code point for digit d (RFC 3492 section 5): a-z then 0-9, lowercase. */
static char
encode_digit(uint64_t d)
{
    return (char)(d < 26 ? 'a' + d : '0' + (d - 26));
}

/* Punycode of in[0:n] (RFC 3492 section 6.3), without "xn--": its length, or -1 if
 * longer than cap.  n is at most MAX_LABEL, so delta cannot overflow 64 bits. */
static Py_ssize_t
punycode_encode(const Py_UCS4 *in, size_t n, char *out, size_t cap)
{
    size_t len = 0, h, b, j;
    for (j = 0; j < n; j++) {
        if (in[j] < 0x80) {
            if (len >= cap) return -1;
            out[len++] = (char)in[j];
        }
    }
    h = b = len;
    if (b > 0) {
        if (len >= cap) return -1;
        out[len++] = '-';
    }
    uint64_t next = INITIAL_N, delta = 0, bias = INITIAL_BIAS;
    while (h < n) {
        uint64_t m = UINT64_MAX;
        for (j = 0; j < n; j++)
            if (in[j] >= next && in[j] < m) m = in[j];
        delta += (m - next) * (h + 1);
        next = m;
        for (j = 0; j < n; j++) {
            if (in[j] < next) delta++;
            if (in[j] != next) continue;
            uint64_t q = delta;
            for (uint64_t k = BASE;; k += BASE) {
                uint64_t t = k <= bias ? TMIN : k >= bias + TMAX ? TMAX : k - bias;
                if (q < t) break;
                if (len >= cap) return -1;
                out[len++] = encode_digit(t + (q - t) % (BASE - t));
                q = (q - t) / (BASE - t);
            }
            if (len >= cap) return -1;
            out[len++] = encode_digit(q);
            bias = adapt(delta, h + 1, h == b);
            delta = 0;
            h++;
        }
        delta++;
        next++;
    }
    return (Py_ssize_t)len;
}

/* --- UTS 46 ToASCII of one label ------------------------------------------------------ */

/* One code point of valid UTF-8 (what PyUnicode_AsUTF8AndSize gives) at s[*i]. */
static Py_UCS4
utf8_next(const unsigned char *s, size_t *i)
{
    unsigned char c = s[*i];
    if (c < 0x80) {
        *i += 1;
        return c;
    }
    int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
    Py_UCS4 cp = c & (0x3F >> extra);
    for (int k = 1; k <= extra; k++) cp = (cp << 6) | (s[*i + (size_t)k] & 0x3F);
    *i += (size_t)extra + 1;
    return cp;
}

static size_t
utf8_put(Py_UCS4 cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* 1 if the Python callback fn(args...) returns true, 0 if false or raises a ValueError
 * (idna's errors are ValueErrors: the reference will raise it), -1 on another error. */
static int
python_says_yes(PyObject *res)
{
    if (res == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError)) return -1;
        PyErr_Clear();
        return 0;
    }
    int truth = PyObject_IsTrue(res);
    Py_DECREF(res);
    return truth;
}

/* The mapped label's checks that need Python: NFC (UTS 46 section 4 step 2, criterion 1)
 * and, for a label with a right-to-left character, CheckBidi (criterion 8, RFC 5893). */
static int
python_checks(const Py_UCS4 *label, size_t n, int rtl)
{
    char utf8[MAX_LABEL * 4];
    size_t len = 0;
    for (size_t j = 0; j < n; j++) len += utf8_put(label[j], utf8 + len);
    PyObject *text = PyUnicode_FromStringAndSize(utf8, (Py_ssize_t)len);
    if (text == NULL) return -1;
    int ok = python_says_yes(PyObject_CallFunctionObjArgs(is_normalized, nfc_form, text, NULL));
    if (ok == 1 && rtl) ok = python_says_yes(PyObject_CallFunctionObjArgs(check_bidi, text, NULL));
    Py_DECREF(text);
    return ok;
}

/* UTS 46 ToASCII of one non-ASCII label s[0:n] (processing, section 4; validity, 4.1;
 * conversion to an A-label, 4.2), as hosts._label_to_ascii does it, written at out:
 * the length written, 0 if the label is not plain (Python answers), -1 on error. */
static Py_ssize_t
label_to_ascii(const unsigned char *s, size_t n, char *out)
{
    Py_UCS4 mapped[MAX_LABEL];
    size_t len = 0, i = 0;
    int rtl = 0, non_ascii = 0;
    /* step 1, the mapping (non-transitional, no STD3 rules) */
    while (i < n) {
        Py_UCS4 cp = utf8_next(s, &i);
        const cp_facts *f = facts_of(cp);
        if (f == NULL) return -1;
        if (f->start == MAP_NONE) return 0;
        const Py_UCS4 *to = f->start == MAP_SELF ? &cp : pool + f->start;
        size_t to_len = f->start == MAP_SELF ? 1 : f->len;
        if (len + to_len > MAX_LABEL) return 0;  /* its A-label would be too long */
        memcpy(mapped + len, to, to_len * sizeof *to);
        len += to_len;
    }
    if (len == 0) return 0;
    /* validity (4.1): hyphens (criteria 2, 3), no leading combining mark (5), each code
     * point valid, mapped to itself (6), no CONTEXTJ/CONTEXTO code point (7) */
    if (mapped[0] == '-' || mapped[len - 1] == '-' || (len >= 4 && mapped[2] == '-' && mapped[3] == '-'))
        return 0;
    for (size_t j = 0; j < len; j++) {
        Py_UCS4 cp = mapped[j];
        if (cp < 0x80) {
            if (cp == '.' || !in_class((unsigned char)cp, bit_host)) return 0;
            continue;
        }
        const cp_facts *f = facts_of(cp);
        if (f == NULL) return -1;
        if (f->start != MAP_SELF || (f->flags & F_CONTEXT) || (j == 0 && (f->flags & F_MARK)))
            return 0;
        rtl |= f->flags & F_RTL;
        non_ascii = 1;
    }
    if (!non_ascii) return 0;  /* mapped to ASCII alone: no A-label (Python) */
    int ok = python_checks(mapped, len, rtl);
    if (ok <= 0) return ok;
    /* the A-label (4.2): "xn--" and Punycode, at most 63 octets */
    memcpy(out, "xn--", 4);
    Py_ssize_t coded = punycode_encode(mapped, len, out + 4, MAX_LABEL - 4);
    return coded < 0 ? 0 : coded + 4;
}

/* The host s[0:n] of a URI, written at out (cap octets): ASCII labels as they are (of the
 * fast path's host class), non-ASCII ones with ToASCII if the scheme uses DNS.  The length
 * written, 0 if not plain, -1 on error. */
static Py_ssize_t
put_host(const unsigned char *s, size_t n, int dns, char *out, size_t cap)
{
    size_t len = 0, i = 0;
    int converted = 0;
    while (i <= n) {
        size_t end = i;
        int ascii = 1;
        for (; end < n && s[end] != '.'; end++) ascii &= s[end] < 0x80;
        if (len + (end - i) + MAX_LABEL + 1 > cap) return 0;
        if (ascii) {
            for (size_t j = i; j < end; j++)
                if (!in_class(s[j], bit_host)) return 0;
            memcpy(out + len, s + i, end - i);
            len += end - i;
        } else {
            if (!dns) return 0;  /* percent-encoded (section 3.1): Python */
            Py_ssize_t got = label_to_ascii(s + i, end - i, out + len);
            if (got <= 0) return got;
            len += (size_t)got;
            converted = 1;
        }
        if (end < n) out[len++] = '.';
        i = end + 1;
    }
    if (converted && len - (len > 0 && out[len - 1] == '.') > MAX_NAME) return 0;
    return (Py_ssize_t)len;
}

/* --- the IRI ----------------------------------------------------------------------------- */

static const char HEX[] = "0123456789ABCDEF";
/* Room for a host of n octets (ASCII as it is, a label at most 63 octets, plus a margin),
 * and for the URI of an IRI of n octets (3 octets for each octet outside the host). */
#define HOST_CAP(n) (3 * (size_t)(n) + 2 * MAX_LABEL + 2)
#define URI_CAP(n) (3 * (size_t)(n) + 2 * MAX_LABEL + 2)

/* Copy s[*i:] while its ASCII characters are in the class (bit), writing the octets of
 * non-ASCII characters as "%HH" (RFC 3987 section 3.1 step 2.2); stops at the first ASCII
 * character outside the class. */
static size_t
put_encoded(const unsigned char *s, size_t n, size_t *i, unsigned char bit, char *out)
{
    size_t len = 0;
    for (; *i < n; (*i)++) {
        unsigned char c = s[*i];
        if (c >= 0x80) {
            out[len++] = '%';
            out[len++] = HEX[c >> 4];
            out[len++] = HEX[c & 15];
        } else if (classes[c] & bit) {
            out[len++] = (char)c;
        } else {
            break;
        }
    }
    return len;
}

static int
is_dns_scheme(const char *s, size_t n)
{
    PyObject *name = PyUnicode_FromStringAndSize(s, (Py_ssize_t)n);
    if (name == NULL) return -1;
    int found = PySet_Contains(dns_schemes, name);
    Py_DECREF(name);
    return found;
}

/* The URI of the IRI s[0:n] written at out (URI_CAP(n) octets): its length, 0 if not
 * plain, -1 on error.  scheme "://" host [":" port] path ["?" query] ["#" fragment]. */
static Py_ssize_t
map_iri(const unsigned char *s, size_t n, char *out)
{
    size_t i = 0, len = 0;
    if (n == 0 || !in_class(s[0], bit_scheme_first)) return 0;
    for (i = 1; i < n && in_class(s[i], bit_scheme); i++)
        ;
    if (i + 3 > n || memcmp(s + i, "://", 3) != 0) return 0;
    int dns = is_dns_scheme((const char *)s, i);
    if (dns < 0) return -1;
    i += 3;
    memcpy(out, s, i);
    len = i;
    size_t host = i;
    while (i < n && s[i] != '/' && s[i] != '?' && s[i] != '#' && s[i] != ':') i++;
    Py_ssize_t got = put_host(s + host, i - host, dns, out + len, HOST_CAP(i - host));
    if (got < 0) return -1;
    if (got == 0 && i > host) return 0;
    len += (size_t)got;
    if (i < n && s[i] == ':') {
        for (out[len++] = (char)s[i++]; i < n && s[i] >= '0' && s[i] <= '9'; i++) out[len++] = (char)s[i];
    }
    if (i < n && s[i] != '/' && s[i] != '?' && s[i] != '#') return 0;  /* userinfo, a bad port */
    len += put_encoded(s, n, &i, bit_path, out + len);
    if (i < n && s[i] == '?') {
        out[len++] = (char)s[i++];
        len += put_encoded(s, n, &i, bit_query, out + len);
    }
    if (i < n && s[i] == '#') {
        out[len++] = (char)s[i++];
        len += put_encoded(s, n, &i, bit_query, out + len);
    }
    return i == n ? (Py_ssize_t)len : 0;
}

static int
check_configured(void)
{
    if (!iri_configured) PyErr_SetString(PyExc_RuntimeError, "the IRI path is not configured");
    return iri_configured;
}

/* iri_to_uri(text) -> str | None (see the top of this file) */
PyObject *
iripath_iri_to_uri(PyObject *module, PyObject *text)
{
    (void)module;
    if (!check_configured()) return NULL;
    Py_ssize_t size;
    const char *s = PyUnicode_AsUTF8AndSize(text, &size);
    if (s == NULL) {  /* a lone surrogate: the reference names it */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (PyUnicode_GetLength(text) == size) Py_RETURN_NONE;  /* ASCII: its own URI */
    char small[1024];
    size_t cap = URI_CAP(size);
    char *out = cap <= sizeof small ? small : PyMem_Malloc(cap);
    if (out == NULL) return PyErr_NoMemory();
    Py_ssize_t len = map_iri((const unsigned char *)s, (size_t)size, out);
    PyObject *res = len < 0 ? NULL : len == 0 ? Py_NewRef(Py_None)
                    : PyUnicode_FromStringAndSize(out, len);
    if (out != small) PyMem_Free(out);
    return res;
}

/* host_to_ascii(host) -> str | None: the host of a DNS scheme alone (for the tests). */
PyObject *
iripath_host_to_ascii(PyObject *module, PyObject *text)
{
    (void)module;
    if (!check_configured()) return NULL;
    Py_ssize_t size;
    const char *s = PyUnicode_AsUTF8AndSize(text, &size);
    if (s == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    char *out = PyMem_Malloc(HOST_CAP(size));
    if (out == NULL) return PyErr_NoMemory();
    Py_ssize_t len = put_host((const unsigned char *)s, (size_t)size, 1, out, HOST_CAP(size));
    PyObject *res = len < 0 ? NULL : len == 0 ? Py_NewRef(Py_None)
                    : PyUnicode_FromStringAndSize(out, len);
    PyMem_Free(out);
    return res;
}

/* clear_iri(): forget every code point's facts (benchmarks measure cold caches). */
PyObject *
iripath_clear(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    for (size_t k = 0; k < N_PAGES; k++) {
        PyMem_Free(pages[k]);
        pages[k] = NULL;
    }
    PyMem_Free(pool);
    pool = NULL;
    pool_len = pool_cap = 0;
    Py_RETURN_NONE;
}

/* Hold a new reference to value in *slot (stolen: value is already a new reference). */
static void
set_ref(PyObject **slot, PyObject *value)
{
    PyObject *old = *slot;
    *slot = value;
    Py_XDECREF(old);
}

/* configure_iri(classes: bytes[128], bits: (scheme_first, scheme, host, path, query),
 *               dns_schemes: frozenset, facts, is_normalized, check_bidi) */
PyObject *
iripath_configure(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *cls, *schemes, *facts, *nfc, *bidi;
    int b[5];
    char *buf;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "S(iiiii)OOOO", &cls, &b[0], &b[1], &b[2], &b[3], &b[4],
                          &schemes, &facts, &nfc, &bidi))
        return NULL;
    if (PyBytes_AsStringAndSize(cls, &buf, &size) < 0) return NULL;
    if (size != 128) {
        PyErr_SetString(PyExc_ValueError, "classes: 128 bytes");
        return NULL;
    }
    if (!PyFrozenSet_Check(schemes)) {
        PyErr_SetString(PyExc_TypeError, "dns_schemes: a frozenset");
        return NULL;
    }
    PyObject *form = PyUnicode_FromString("NFC");
    if (form == NULL) return NULL;
    iri_configured = 0;
    memcpy(classes, buf, 128);
    bit_scheme_first = (unsigned char)b[0];
    bit_scheme = (unsigned char)b[1];
    bit_host = (unsigned char)b[2];
    bit_path = (unsigned char)b[3];
    bit_query = (unsigned char)b[4];
    set_ref(&dns_schemes, Py_NewRef(schemes));
    set_ref(&describe, Py_NewRef(facts));
    set_ref(&is_normalized, Py_NewRef(nfc));
    set_ref(&check_bidi, Py_NewRef(bidi));
    set_ref(&nfc_form, form);
    iripath_clear(NULL, NULL);
    iri_configured = 1;
    Py_RETURN_NONE;
}
