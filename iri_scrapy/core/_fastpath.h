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
/* Add the batch functions and the FingerprintTable type to the module (_batch.c). */
int batch_init(PyObject *module);

#endif
