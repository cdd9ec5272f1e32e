/* What _fastpath.c (the "already canonical?" test) and _batch.c (dedupe as a batch: the
 * key, its fingerprint and the seen-set in one loop over a block of lines) share. */
#ifndef IRI_SCRAPY_FASTPATH_H
#define IRI_SCRAPY_FASTPATH_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define FASTPATH_NO (-1)
#define FASTPATH_ERROR (-2)

/* The key length of s[0:n] if it is already canonical, else FASTPATH_NO or FASTPATH_ERROR. */
Py_ssize_t fastpath_check(const char *s, size_t n, int keep_fragment);
/* Whether configure() has handed the fast path its tables. */
int fastpath_ready(void);
/* Whether the character c is in one of the fast path's classes: the host (a lowercase
 * reg-name), the path, the query (and fragment). */
enum { FASTPATH_HOST = 4, FASTPATH_PATH = 8, FASTPATH_QUERY = 16 };
int fastpath_in_class(unsigned char c, int which);
/* For a lowercase scheme with a scheme-based rule: 1 and its default port ("" if none)
 * and whether it uses DNS; 0 for another scheme. */
int fastpath_scheme(const char *s, size_t n, const char **port, size_t *port_len, int *dns);
/* The alias rungs of an ASCII URL (_aliases.c): its key written to out (ALIAS_OUT
 * bytes: each character may become an escape) and the mask of the rungs that changed
 * it, or FASTPATH_NO. */
#define ALIAS_MAX 4096
#define ALIAS_OUT (3 * ALIAS_MAX + 2)
Py_ssize_t alias_key(const char *s, size_t n, int keep_fragment, char *out, int *mask);
/* The number of alias rungs and the index (0 to ALIAS_RUNGS - 1) of each bit of a mask. */
#define ALIAS_RUNGS 4
int alias_rung_index(int bit);
/* Add configure_aliases and alias_key to the module (_aliases.c). */
int aliases_init(PyObject *module);
/* Add the batch functions and the FingerprintTable type to the module (_batch.c). */
int batch_init(PyObject *module);

#endif
