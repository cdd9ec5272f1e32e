/* The common alias rungs of an ASCII URL in C, for dedupe as a batch (_batch.c) and the
 * C normalize (_fastpath.c).
 *
 * Part of the optional _fastpath extension (see _fastpath.c).  alias_key() answers, for
 * an absolute ASCII URL with an authority, what ladder.fused_rungs answers: the key (RFC
 * 3987 5.3, level SCHEME, URI form) and the mask of the rungs that changed a component,
 * for the rungs the aliases of a dump need: case (scheme, host, the hex of escapes,
 * 5.3.2.1), percent-encoding (escapes of unreserved octets decoded, 5.3.2.3, and the
 * printable ASCII characters a URI does not allow written as escapes, 3.1 step 2), dot
 * segments (RFC 3986 5.2.4, 5.3.2.4) and the scheme's default port, leading zeros of a
 * port and the empty path (5.3.3).  It holds no rule of its own either: the unreserved
 * octets, the characters the percent rung writes as escapes (mapping.encode_component,
 * asked once per character) and the mask's bits come from the Python definitions
 * (configure_aliases, from iri_scrapy.core.native), the host and the schemes from the
 * fast path's tables, and every key it gives must pass the fast path's "already
 * canonical?" test (fastpath_check) -- which refuses what is not modelled here (an IPv4
 * address, an empty label, a port above 65535...).  Everything else is FASTPATH_NO and
 * goes to the Python reference: a byte outside printable ASCII (a space inside is
 * printable, one at either end is stripped by the reference: refused), userinfo, an IP
 * literal, an escape in the host, an A-label ("xn--"), a "%" that starts no escape,
 * mailto, a line over ALIAS_MAX bytes.
 * tests/core/test_native_aliases.py holds it to ladder.fused_rungs.
 */
#include "_fastpath.h"  /* Python.h first */

#include <stdint.h>
#include <string.h>

static unsigned char unreserved[128];  /* 1 where %XX of the octet is decoded (5.3.2.3) */
static unsigned char encoded[128];     /* 1 where the percent rung writes the octet as %XX */
static int rung_bits[ALIAS_RUNGS];     /* the ladder's bits: case, percent, path, scheme */
static int configured;

enum { R_CASE, R_PERCENT, R_PATH, R_SCHEME };

static const char HEX[] = "0123456789ABCDEF";

static int
hex_any(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int
alias_rung_index(int bit)
{
    for (int k = 0; k < ALIAS_RUNGS; k++)
        if (rung_bits[k] == bit) return k;
    return -1;
}

/* s[i:end) (a path, query or kept fragment: the fast path's class which) copied to out
 * at *o through the case and percent rungs: each escape's hex uppercased (case, if it
 * was not), an escape of an unreserved octet decoded and a character the percent rung
 * encodes written as its escape (percent).  -1 for another character out of the class
 * or a "%" that starts no escape: then the Python reference answers.  out holds 3 bytes
 * for each of s (ALIAS_OUT). */
static int
copy_component(const char *s, size_t i, size_t end, int which, char *out, size_t *o,
               int *mask)
{
    size_t k = *o;
    while (i < end) {
        for (; i < end && s[i] != '%'; i++) {
            unsigned char c = (unsigned char)s[i];
            if (fastpath_in_class(c, which)) {
                out[k++] = (char)c;
            } else if (c < 128 && encoded[c]) {
                out[k++] = '%';
                out[k++] = HEX[c >> 4];
                out[k++] = HEX[c & 15];
                *mask |= rung_bits[R_PERCENT];
            } else {
                return -1;
            }
        }
        if (i == end) break;
        if (i + 2 >= end) return -1;
        unsigned char a = (unsigned char)s[i + 1], b = (unsigned char)s[i + 2];
        int hi = hex_any(a), lo = hex_any(b);
        if (hi < 0 || lo < 0) return -1;
        if (a >= 'a' || b >= 'a') *mask |= rung_bits[R_CASE];
        int octet = hi * 16 + lo;
        if (octet < 128 && unreserved[octet]) {
            out[k++] = (char)octet;
            *mask |= rung_bits[R_PERCENT];
        } else {
            out[k++] = '%';
            out[k++] = HEX[hi];
            out[k++] = HEX[lo];
        }
        i += 3;
    }
    *o = k;
    return 0;
}

static int
starts(const char *p, size_t n, size_t i, const char *what, size_t len)
{
    return i + len <= n && memcmp(p + i, what, len) == 0;
}

/* RFC 3986 5.2.4 as resolve.remove_dot_segments (its rules A-E, literally): p[0:n) to
 * out, the result's length; at[] holds where each segment moved by rule E starts. */
static size_t
remove_dot_segments(const char *p, size_t n, char *out, uint16_t *at)
{
    size_t i = 0, o = 0, depth = 0;
#define PUSH(src, len) do { at[depth++] = (uint16_t)o; memcpy(out + o, (src), (len)); o += (len); } while (0)
#define POP() do { if (depth) o = at[--depth]; } while (0)
    while (i < n) {
        if (starts(p, n, i, "../", 3)) {  /* A */
            i += 3;
        } else if (starts(p, n, i, "./", 2)) {  /* A */
            i += 2;
        } else if (starts(p, n, i, "/./", 3)) {  /* B */
            i += 2;
        } else if (i + 2 == n && starts(p, n, i, "/.", 2)) {  /* B, at the end */
            PUSH("/", 1);
            i = n;
        } else if (starts(p, n, i, "/../", 4)) {  /* C */
            i += 3;
            POP();
        } else if (i + 3 == n && starts(p, n, i, "/..", 3)) {  /* C, at the end */
            POP();
            PUSH("/", 1);
            i = n;
        } else if ((i + 1 == n && p[i] == '.') || (i + 2 == n && starts(p, n, i, "..", 2))) {
            i = n;  /* D */
        } else {  /* E */
            size_t from = p[i] == '/' ? i + 1 : i;
            const char *slash = from < n ? memchr(p + from, '/', n - from) : NULL;
            size_t j = slash != NULL ? (size_t)(slash - p) : n;
            PUSH(p + i, j - i);
            i = j;
        }
    }
#undef PUSH
#undef POP
    return o;
}

/* The path written at out[start:*o) without its dot segments (the path rung). */
static void
path_rung(char *out, size_t start, size_t *o, int *mask)
{
    size_t n = *o - start;
    const char *path = out + start;
    int dots = 0;
    for (size_t k = 0; k + 1 < n && !dots; k++) dots = path[k] == '/' && path[k + 1] == '.';
    if (!dots) return;
    char fresh[ALIAS_OUT];
    uint16_t at[ALIAS_OUT];
    size_t m = remove_dot_segments(path, n, fresh, at);
    if (m != n || memcmp(fresh, path, n) != 0) *mask |= rung_bits[R_PATH];
    memcpy(out + start, fresh, m);
    *o = start + m;
}

/* The port s[i:end) after "host:" through the scheme rung (ladder._canonical_port):
 * leading zeros dropped, the default port of the scheme (and an empty port) elided;
 * -1 for what the reference refuses or keeps apart (not digits, above 65535). */
static int
port_rung(const char *s, size_t i, size_t end, const char *dflt, size_t dflt_len,
          char *out, size_t *o, int *mask)
{
    size_t raw = i;
    for (size_t k = i; k < end; k++)
        if (s[k] < '0' || s[k] > '9') return -1;
    while (i < end && s[i] == '0') i++;
    size_t len = end - i;
    if (len == 0 && raw < end) {  /* all zeros: port "0" */
        i = end - 1;
        len = 1;
    }
    if (len > 5 || (len == 5 && memcmp(s + i, "65535", 5) > 0)) return -1;
    if (len == 0 || (len == dflt_len && memcmp(s + i, dflt, len) == 0)) {
        *mask |= rung_bits[R_SCHEME];  /* elided */
        return 0;
    }
    if (i != raw) *mask |= rung_bits[R_SCHEME];
    out[(*o)++] = ':';
    memcpy(out + *o, s + i, len);
    *o += len;
    return 0;
}

/* The reg-name s[i:end) lowercased (the case rung) to out; -1 for a host the fast
 * path's class does not hold, or one with an A-label. */
static int
host_rung(const char *s, size_t i, size_t end, char *out, size_t *o, int *mask)
{
    size_t k = *o, start = k;
    if (i == end) return -1;
    for (; i < end; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 'A' && c <= 'Z') {
            c = (unsigned char)(c + 32);
            *mask |= rung_bits[R_CASE];
        }
        if (!fastpath_in_class(c, FASTPATH_HOST)) return -1;
        out[k++] = (char)c;
    }
    for (size_t j = start; j + 4 <= k; j++)
        if ((j == start || out[j - 1] == '.') && memcmp(out + j, "xn--", 4) == 0) return -1;
    *o = k;
    return 0;
}

/* The scheme s[0:n) lowercased (the case rung); -1 if it is none, or mailto. */
static int
scheme_rung(const char *s, size_t n, char *out, int *mask)
{
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c >= 'A' && c <= 'Z') {
            c = (unsigned char)(c + 32);
            *mask |= rung_bits[R_CASE];
        } else if (!((c >= 'a' && c <= 'z') || (k > 0 && ((c >= '0' && c <= '9') || c == '+'
                                                               || c == '-' || c == '.')))) {
            return -1;
        }
        out[k] = (char)c;
    }
    return n == 6 && memcmp(out, "mailto", 6) == 0 ? -1 : 0;
}

Py_ssize_t
alias_key(const char *s, size_t n, int keep_fragment, char *out, int *mask_out)
{
    if (!configured || n == 0 || n > ALIAS_MAX) return FASTPATH_NO;
    for (size_t k = 0; k < n; k++)  /* printable ASCII and space: nothing to refuse */
        if ((unsigned char)s[k] < 0x20 || (unsigned char)s[k] > 0x7E) return FASTPATH_NO;
    if (s[0] == ' ' || s[n - 1] == ' ') return FASTPATH_NO;  /* stripped (parsing.WHITESPACE) */
    const char *colon = memchr(s, ':', n);
    if (colon == NULL) return FASTPATH_NO;
    size_t i = (size_t)(colon - s), o = 0;
    int mask = 0;
    if (i == 0 || i + 3 > n || s[i + 1] != '/' || s[i + 2] != '/'
            || scheme_rung(s, i, out, &mask) < 0)
        return FASTPATH_NO;
    const char *dflt = "";
    size_t dflt_len = 0;
    int dns = 0;
    fastpath_scheme(out, i, &dflt, &dflt_len, &dns);
    o = i;
    memcpy(out + o, "://", 3);
    o += 3;
    i += 3;
    size_t auth = i;
    while (i < n && s[i] != '/' && s[i] != '?' && s[i] != '#') i++;
    size_t host_end = i;
    for (size_t k = auth; k < i; k++) {
        if (s[k] == '@' || s[k] == '[') return FASTPATH_NO;  /* userinfo, IP literal */
        if (s[k] == ':') host_end = k;  /* the last one (parsing.split_authority) */
    }
    if (host_rung(s, auth, host_end, out, &o, &mask) < 0) return FASTPATH_NO;
    if (host_end < i && port_rung(s, host_end + 1, i, dflt, dflt_len, out, &o, &mask) < 0)
        return FASTPATH_NO;
    size_t path = o, end = i;
    while (end < n && s[end] != '?' && s[end] != '#') end++;
    if (copy_component(s, i, end, FASTPATH_PATH, out, &o, &mask) < 0) return FASTPATH_NO;
    path_rung(out, path, &o, &mask);
    if (o == path && dns) {  /* the empty path (5.3.3) */
        out[o++] = '/';
        mask |= rung_bits[R_SCHEME];
    }
    i = end;
    if (i < n && s[i] == '?') {
        while (end < n && s[end] != '#') end++;
        out[o++] = '?';
        if (copy_component(s, i + 1, end, FASTPATH_QUERY, out, &o, &mask) < 0) return FASTPATH_NO;
        i = end;
    }
    if (i < n && keep_fragment) {  /* s[i] == '#': the rest is the fragment */
        out[o++] = '#';
        if (copy_component(s, i + 1, n, FASTPATH_QUERY, out, &o, &mask) < 0) return FASTPATH_NO;
    }
    /* What this does not model the fast path refuses: then the reference answers. */
    Py_ssize_t check = fastpath_check(out, o, 1);
    if (check == FASTPATH_ERROR) return FASTPATH_ERROR;
    if (check != (Py_ssize_t)o) return FASTPATH_NO;
    *mask_out = mask;
    return (Py_ssize_t)o;
}

/* configure_aliases(unreserved: bytes[128], encoded: bytes[128], bits: (case, percent,
 * path, scheme)) */
static PyObject *
configure_aliases(PyObject *module, PyObject *args)
{
    (void)module;
    const char *table, *escaped;
    Py_ssize_t len, escaped_len;
    int bits[ALIAS_RUNGS];
    if (!PyArg_ParseTuple(args, "y#y#(iiii)", &table, &len, &escaped, &escaped_len, &bits[0],
                          &bits[1], &bits[2], &bits[3]))
        return NULL;
    if (len != 128 || escaped_len != 128) {
        PyErr_SetString(PyExc_ValueError, "unreserved, encoded: 128 bytes each");
        return NULL;
    }
    for (int k = 0; k < ALIAS_RUNGS; k++) {
        if (bits[k] <= 0 || (bits[k] & (bits[k] - 1)) != 0) {
            PyErr_SetString(PyExc_ValueError, "a rung's bit must be a power of two");
            return NULL;
        }
    }
    memcpy(unreserved, table, 128);
    memcpy(encoded, escaped, 128);
    memcpy(rung_bits, bits, sizeof rung_bits);
    configured = 1;
    Py_RETURN_NONE;
}

/* alias_key(text: str, keep_fragment) -> (key, mask) | None: see alias_key(). */
static PyObject *
alias_key_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "alias_key(text, keep_fragment)");
        return NULL;
    }
    if (!configured || !fastpath_ready()) {
        PyErr_SetString(PyExc_RuntimeError, "iri_scrapy.core._fastpath is not configured");
        return NULL;
    }
    int keep = PyObject_IsTrue(args[1]);
    if (keep < 0) return NULL;
    Py_ssize_t size;
    const char *s = PyUnicode_AsUTF8AndSize(args[0], &size);
    if (s == NULL) {  /* a lone surrogate: not ASCII, the reference answers */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    char out[ALIAS_OUT];
    int mask = 0;
    Py_ssize_t key = alias_key(s, (size_t)size, keep, out, &mask);
    if (key == FASTPATH_ERROR) return NULL;
    if (key == FASTPATH_NO) Py_RETURN_NONE;
    return Py_BuildValue("s#i", out, key, mask);
}

static PyMethodDef alias_methods[] = {
    {"configure_aliases", configure_aliases, METH_VARARGS,
     "Hand the alias rungs their tables (iri_scrapy.core.native)."},
    {"alias_key", (PyCFunction)(void (*)(void))alias_key_py, METH_FASTCALL,
     "alias_key(text, keep_fragment) -> (key, mask) | None: see _aliases.c."},
    {NULL, NULL, 0, NULL},
};

int
aliases_init(PyObject *module)
{
    return PyModule_AddFunctions(module, alias_methods);
}
