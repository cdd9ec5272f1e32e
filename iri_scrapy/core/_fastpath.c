/* The ladder's fast path in C: "is this ASCII URI already canonical at level SCHEME?"
 *
 * Optional: a build without a C compiler leaves it out and iri_scrapy.core.ladder uses the
 * pure-Python reference (``ladder.fast_path_reference``), which this module must agree
 * with on every input (tests/core/test_native.py runs both over the corpora and generated
 * mutations).  It holds no rule of its own: every character class, the canonical-escape
 * table, the default ports, the DNS schemes and the URL Standard's "ends in a number" check
 * are handed to configure() by iri_scrapy.core.native, built from the Python definitions.
 * Only the stable ABI (abi3, Python 3.10+) is used, so one wheel serves every version.
 */
#include "_fastpath.h"  /* Python.h first */

#include <string.h>

enum {
    C_SCHEME_FIRST = 1, C_SCHEME = 2, C_HOST = FASTPATH_HOST, C_PATH = FASTPATH_PATH,
    C_QUERY = FASTPATH_QUERY, C_NUMBER_END = 32, C_NUMBER_START = 64,
};

typedef struct {
    char name[16];
    size_t name_len;
    char port[8];
    size_t port_len;
    int dns;
} scheme_entry;

static unsigned char classes[256];  /* the upper half: no class */
static unsigned char escape_ok[256];
static scheme_entry schemes[16];
static size_t n_schemes;
static PyObject *ends_in_number;  /* iri_scrapy.core.hosts.ends_in_number */
static int configured;

static int
hexval(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;  /* lowercase hex is not canonical (RFC 3986 6.2.2.1) */
}

/* The end of the run of s[i:n) in the class which (one bit): four bytes a step, their
 * classes ANDed (the path and query are most of a URL), then byte by byte. */
static inline size_t
span(const char *s, size_t i, size_t n, int which)
{
    const unsigned char *u = (const unsigned char *)s;
    while (i + 4 <= n && (classes[u[i]] & classes[u[i + 1]] & classes[u[i + 2]]
                          & classes[u[i + 3]] & which))
        i += 4;
    while (i < n && (classes[u[i]] & which)) i++;
    return i;
}

static const scheme_entry *
known_scheme(const char *s, size_t n)
{
    for (size_t i = 0; i < n_schemes; i++) {
        if (schemes[i].name_len == n && memcmp(schemes[i].name, s, n) == 0) return &schemes[i];
    }
    return NULL;
}

/* "/." or "/.." followed by "/" or the end of the path: a dot segment (RFC 3986 5.2.4).
 * A path holds few dots: memchr finds them. */
static int
has_dot_segment(const char *p, size_t n)
{
    const char *end = p + n;
    for (const char *dot = memchr(p, '.', n); dot != NULL;
         dot = memchr(dot + 1, '.', (size_t)(end - dot - 1))) {
        if (dot == p || dot[-1] != '/') continue;
        const char *after = dot + 1;
        if (after < end && *after == '.') after++;
        if (after == end || *after == '/') return 1;
    }
    return 0;
}

static int
host_ends_in_number(const char *host, size_t n)
{
    if (n == 0) return 0;
    unsigned char last = (unsigned char)host[n - 1];
    if (!(classes[last] & C_NUMBER_END)) return 0;  /* most hosts: ".com" */
    /* the last label (less one trailing dot) must start as a number ("docs.example": no) */
    size_t end = last == '.' ? n - 1 : n, start = end;
    while (start > 0 && host[start - 1] != '.') start--;
    if (start == end || !(classes[(unsigned char)host[start]] & C_NUMBER_START)) return 0;
    PyObject *text = PyUnicode_FromStringAndSize(host, (Py_ssize_t)n);
    if (text == NULL) return -1;
    PyObject *res = PyObject_CallFunctionObjArgs(ends_in_number, text, NULL);
    Py_DECREF(text);
    if (res == NULL) return -1;
    int truth = PyObject_IsTrue(res);
    Py_DECREF(res);
    return truth;
}

/* The length of the key of the n bytes at s if they are already canonical (less the
 * fragment unless keep_fragment), FASTPATH_NO if not, FASTPATH_ERROR with an exception
 * set.  Also used by the batch loop (_batch.c). */
Py_ssize_t
fastpath_check(const char *s, size_t n, int keep_fragment)
{
    size_t i = 0;
    /* scheme "://" */
    if (n == 0 || !(classes[(unsigned char)s[0]] & C_SCHEME_FIRST))
        return FASTPATH_NO;
    i = span(s, 1, n, C_SCHEME);
    size_t scheme_len = i;
    if (i + 3 > n || s[i] != ':' || s[i + 1] != '/' || s[i + 2] != '/') return FASTPATH_NO;
    i += 3;
    /* host: a lowercase reg-name without escapes */
    size_t host_start = i;
    i = span(s, i, n, C_HOST);
    size_t host_len = i - host_start;
    if (host_len == 0) return FASTPATH_NO;
    /* port: 1-5 digits, no leading zero */
    size_t port_start = 0, port_len = 0;
    if (i < n && s[i] == ':') {
        i++;
        port_start = i;
        if (i >= n || s[i] < '1' || s[i] > '9') return FASTPATH_NO;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            ;
        port_len = i - port_start;
        if (port_len > 5) return FASTPATH_NO;
    }
    if (i < n && s[i] != '/' && s[i] != '?' && s[i] != '#') return FASTPATH_NO;
    size_t path_start = i, path_len = 0;
    int has_path = 0;
    if (i < n && s[i] == '/') {
        has_path = 1;
        i = span(s, i + 1, n, C_PATH);
        path_len = i - path_start;
    }
    if (i < n && s[i] == '?') {
        i = span(s, i + 1, n, C_QUERY);
    }
    size_t fragment = 0;  /* index of "#", 0 for none (it cannot be at 0) */
    if (i < n && s[i] == '#') {
        fragment = i;
        i = span(s, i + 1, n, C_QUERY);
    }
    if (i != n) return FASTPATH_NO;

    const scheme_entry *known = known_scheme(s, scheme_len);
    if (known != NULL && known->port_len) {
        const char *host = s + host_start, *end = host + host_len;
        if (host[0] == '.') return FASTPATH_NO;  /* an empty first label */
        for (const char *dot = memchr(host, '.', host_len); dot != NULL && dot + 1 < end;
             dot = memchr(dot + 1, '.', (size_t)(end - dot - 1))) {
            if (dot[1] == '.') return FASTPATH_NO;  /* an empty label */
        }
        int number = host_ends_in_number(host, host_len);
        if (number < 0) return FASTPATH_ERROR;
        if (number) return FASTPATH_NO;
        if (port_len == 5 && memcmp(s + port_start, "65535", 5) > 0) return FASTPATH_NO;
    }
    /* every "%" starts a canonical escape: uppercase hex, not an unreserved octet */
    for (const char *p = memchr(s, '%', n); p != NULL; p = memchr(p + 1, '%', n - (size_t)(p + 1 - s))) {
        size_t at = (size_t)(p - s);
        if (at + 2 >= n) return FASTPATH_NO;
        int hi = hexval((unsigned char)s[at + 1]), lo = hexval((unsigned char)s[at + 2]);
        if (hi < 0 || lo < 0 || !escape_ok[hi * 16 + lo]) return FASTPATH_NO;
    }
    if (has_path) {
        if (has_dot_segment(s + path_start, path_len)) return FASTPATH_NO;
    } else if (known != NULL && known->dns) {
        return FASTPATH_NO;  /* the empty-path rule would write "/" (RFC 3987 5.3.3) */
    }
    if (port_len && known != NULL && known->port_len == port_len
            && memcmp(known->port, s + port_start, port_len) == 0)
        return FASTPATH_NO;  /* the scheme's default port is dropped */
    return (Py_ssize_t)(fragment && !keep_fragment ? fragment : n);
}

int
fastpath_in_class(unsigned char c, int which)
{
    return classes[c] & which;
}

int
fastpath_scheme(const char *s, size_t n, const char **port, size_t *port_len, int *dns)
{
    const scheme_entry *known = known_scheme(s, n);
    if (known == NULL) return 0;
    *port = known->port;
    *port_len = known->port_len;
    *dns = known->dns;
    return 1;
}

int
fastpath_ready(void)
{
    return configured;
}

static PyObject *
fast_path(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "fast_path(text, keep_fragment)");
        return NULL;
    }
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "iri_scrapy.core._fastpath is not configured");
        return NULL;
    }
    PyObject *text = args[0];
    int keep_fragment = PyObject_IsTrue(args[1]);
    if (keep_fragment < 0) return NULL;
    Py_ssize_t size;
    const char *s = PyUnicode_AsUTF8AndSize(text, &size);
    if (s == NULL) {  /* a lone surrogate: not canonical ASCII, the reference answers */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t key = fastpath_check(s, (size_t)size, keep_fragment);
    if (key == FASTPATH_ERROR) return NULL;
    if (key == FASTPATH_NO) Py_RETURN_NONE;
    if (key < size) return PyUnicode_Substring(text, 0, key);
    Py_INCREF(text);
    return text;
}

/* The IRI path (_iripath.c, compiled into this module): IRIs mapped to URIs for fast_path. */
PyObject *iripath_iri_to_uri(PyObject *module, PyObject *text);
PyObject *iripath_host_to_ascii(PyObject *module, PyObject *text);
PyObject *iripath_configure(PyObject *module, PyObject *args);
PyObject *iripath_clear(PyObject *module, PyObject *unused);

/* normalize(iri, level=Level.SCHEME, *, form="uri", keep_fragment=True, nfc=False,
 * rules=None) as the package's public function: the call the fast path answers (a str
 * at level SCHEME, or PROTOCOL without rules, form "uri", no NFC) is answered here without
 * entering Python, by the fast path, the IRI path or the alias rungs (_aliases.c, whose
 * keys the fast path checks); any other call, and any text none answers, goes to
 * the Python reference (ladder.normalize_reference) with the same arguments.  So the two
 * give the same result and raise the same errors by construction; configure_entry()
 * hands over the reference, the two fast levels and the reference's docstring. */
static PyObject *entry_reference;   /* iri_scrapy.core.ladder.normalize_reference */
static PyObject *entry_levels[2];   /* Level.SCHEME, Level.PROTOCOL */
static PyObject *keep_fragment_name; /* "keep_fragment", interned: a caller's keyword is it */
static PyMethodDef entry_def;       /* its ml_doc: the reference's, with its signature */

/* The reference called with the entry's arguments (the slow path: a tuple and a dict,
 * since vectorcall is not in the stable ABI before Python 3.12). */
static PyObject *
entry_delegate(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *tuple = PyTuple_New(nargs), *kwargs = NULL, *res = NULL;
    if (tuple == NULL) return NULL;
    for (Py_ssize_t k = 0; k < nargs; k++) {
        Py_INCREF(args[k]);
        PyTuple_SetItem(tuple, k, args[k]);
    }
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
    if (nkw > 0) {
        kwargs = PyDict_New();
        if (kwargs == NULL) goto done;
        for (Py_ssize_t k = 0; k < nkw; k++) {
            if (PyDict_SetItem(kwargs, PyTuple_GetItem(kwnames, k), args[nargs + k]) < 0) goto done;
        }
    }
    res = PyObject_Call(entry_reference, tuple, kwargs);
done:
    Py_DECREF(tuple);
    Py_XDECREF(kwargs);
    return res;
}

/* The key of an ASCII text the fast path refuses by the common alias rungs (alias_key,
 * _aliases.c: case, percent-encoding, dot segments, default port, empty path; the key
 * it gives passed the fast path), or None: then the reference answers. */
static PyObject *
entry_alias(PyObject *text, PyObject *keep)
{
    int keep_fragment = PyObject_IsTrue(keep);
    if (keep_fragment < 0) return NULL;
    Py_ssize_t size;
    const char *s = PyUnicode_AsUTF8AndSize(text, &size);
    if (s == NULL) {  /* a lone surrogate: the reference raises its error */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    char out[ALIAS_OUT];
    int mask;
    Py_ssize_t key = alias_key(s, (size_t)size, keep_fragment, out, &mask);
    if (key == FASTPATH_ERROR) return NULL;
    if (key == FASTPATH_NO) Py_RETURN_NONE;
    return PyUnicode_FromStringAndSize(out, key);
}

static PyObject *
entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self;
    if (entry_reference == NULL || !configured) {
        PyErr_SetString(PyExc_RuntimeError, "iri_scrapy.core._fastpath is not configured");
        return NULL;
    }
    PyObject *level = nargs == 2 ? args[1] : NULL, *keep = Py_True, *rules = Py_None;
    int fast = nargs == 1 || nargs == 2;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
    for (Py_ssize_t k = 0; fast && k < nkw; k++) {
        PyObject *name = PyTuple_GetItem(kwnames, k), *value = args[nargs + k];
        if (name == keep_fragment_name
                || PyUnicode_CompareWithASCIIString(name, "keep_fragment") == 0) {
            keep = value;
        } else if (PyUnicode_CompareWithASCIIString(name, "form") == 0) {
            fast = PyUnicode_CheckExact(value) && PyUnicode_CompareWithASCIIString(value, "uri") == 0;
        } else if (PyUnicode_CompareWithASCIIString(name, "nfc") == 0) {
            fast = value == Py_False;
        } else if (PyUnicode_CompareWithASCIIString(name, "rules") == 0) {
            rules = value;
        } else if (PyUnicode_CompareWithASCIIString(name, "level") == 0 && level == NULL) {
            level = value;
        } else {
            fast = 0;  /* a repeated or unknown argument: the reference raises TypeError */
        }
    }
    if (fast && level != NULL && level != entry_levels[0]
            && !(level == entry_levels[1] && rules == Py_None))
        fast = 0;
    if (fast && PyUnicode_CheckExact(args[0])) {
        PyObject *pair[2] = {args[0], keep};
        PyObject *res = fast_path(NULL, pair, 2);
        if (res != Py_None) return res;  /* the canonical text, or NULL on an error */
        Py_DECREF(res);
        /* an IRI: its URI (the IRI path, _iripath.c) may be canonical */
        PyObject *uri = iripath_iri_to_uri(NULL, args[0]);
        if (uri == NULL) return NULL;
        if (uri != Py_None) {
            pair[0] = uri;
            res = fast_path(NULL, pair, 2);
            Py_DECREF(uri);
            if (res != Py_None) return res;
            Py_DECREF(res);
        } else {
            Py_DECREF(uri);
        }
        res = entry_alias(args[0], keep);
        if (res != Py_None) return res;
        Py_DECREF(res);
    }
    return entry_delegate(args, nargs, kwnames);
}

static void
replace(PyObject **slot, PyObject *value)
{
    PyObject *old = *slot;
    Py_INCREF(value);
    *slot = value;
    Py_XDECREF(old);
}

/* configure_entry(reference, (Level.SCHEME, Level.PROTOCOL), doc, module) -> the entry */
static PyObject *
configure_entry(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *reference, *scheme, *protocol, *where;
    const char *doc;
    if (!PyArg_ParseTuple(args, "O(OO)sU", &reference, &scheme, &protocol, &doc, &where))
        return NULL;
    if (entry_def.ml_name == NULL) {  /* once: the function object keeps pointing at it */
        char *copy = PyMem_Malloc(strlen(doc) + 1);
        if (copy == NULL) return PyErr_NoMemory();
        strcpy(copy, doc);
        entry_def.ml_name = "normalize";
        entry_def.ml_meth = (PyCFunction)(void (*)(void))entry;
        entry_def.ml_flags = METH_FASTCALL | METH_KEYWORDS;
        entry_def.ml_doc = copy;
    }
    if (keep_fragment_name == NULL) {
        keep_fragment_name = PyUnicode_InternFromString("keep_fragment");
        if (keep_fragment_name == NULL) return NULL;
    }
    replace(&entry_reference, reference);
    replace(&entry_levels[0], scheme);
    replace(&entry_levels[1], protocol);
    return PyCFunction_NewEx(&entry_def, NULL, where);
}

static int
read_bytes(PyObject *obj, unsigned char *out, Py_ssize_t want, const char *what)
{
    char *buf;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(obj, &buf, &len) < 0) return -1;
    if (len != want) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, not %zd", what, len, want);
        return -1;
    }
    memcpy(out, buf, (size_t)want);
    return 0;
}

static int
copy_ascii(PyObject *obj, char *out, size_t cap, size_t *len)
{
    Py_ssize_t size;
    const char *s = PyUnicode_AsUTF8AndSize(obj, &size);
    if (s == NULL) return -1;
    if ((size_t)size >= cap) {
        PyErr_SetString(PyExc_ValueError, "a scheme or port too long for the fast path");
        return -1;
    }
    memcpy(out, s, (size_t)size);
    *len = (size_t)size;
    return 0;
}

/* configure(classes: bytes[128], escapes: bytes[256], schemes: tuple[(name, port, dns)], ends_in_number) */
static PyObject *
configure(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *cls, *esc, *table, *checker;
    if (!PyArg_ParseTuple(args, "OOOO", &cls, &esc, &table, &checker)) return NULL;
    configured = 0;
    if (read_bytes(cls, classes, 128, "classes") < 0) return NULL;
    if (read_bytes(esc, escape_ok, 256, "escapes") < 0) return NULL;
    Py_ssize_t count = PyTuple_Size(table);
    if (count < 0) return NULL;
    if (count > (Py_ssize_t)(sizeof schemes / sizeof schemes[0])) {
        PyErr_SetString(PyExc_ValueError, "too many schemes for the fast path");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *name, *port;
        int dns;
        if (!PyArg_ParseTuple(PyTuple_GetItem(table, k), "UUp", &name, &port, &dns)) return NULL;
        if (copy_ascii(name, schemes[k].name, sizeof schemes[k].name, &schemes[k].name_len) < 0
                || copy_ascii(port, schemes[k].port, sizeof schemes[k].port, &schemes[k].port_len) < 0)
            return NULL;
        schemes[k].dns = dns;
    }
    n_schemes = (size_t)count;
    Py_INCREF(checker);
    PyObject *old = ends_in_number;
    ends_in_number = checker;
    Py_XDECREF(old);
    configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fast_path", (PyCFunction)(void (*)(void))fast_path, METH_FASTCALL,
     "fast_path(text, keep_fragment) -> str | None: text if already canonical (see ladder)."},
    {"configure", configure, METH_VARARGS, "Hand the fast path its tables (iri_scrapy.core.native)."},
    {"configure_entry", configure_entry, METH_VARARGS,
     "configure_entry(reference, levels, doc, module) -> normalize answered in C (see native)."},
    {"iri_to_uri", iripath_iri_to_uri, METH_O,
     "iri_to_uri(text) -> str | None: the URI of an IRI (RFC 3987 3.1), None: ask Python."},
    {"host_to_ascii", iripath_host_to_ascii, METH_O,
     "host_to_ascii(host) -> str | None: a DNS host with UTS 46 ToASCII, None: ask Python."},
    {"configure_iri", iripath_configure, METH_VARARGS,
     "Hand the IRI path its tables and callbacks (iri_scrapy.core.native)."},
    {"clear_iri", iripath_clear, METH_NOARGS, "Forget the code points' facts (cold caches)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastpath", "The ladder's fast path in C (optional).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__fastpath(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (batch_init(m) < 0 || aliases_init(m) < 0)) Py_CLEAR(m);
    return m;
}
