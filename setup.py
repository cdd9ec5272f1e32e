"""The optional native extension (iri_scrapy/core/_fastpath.c, with the IRI path in
_iripath.c and dedupe as a batch in _batch.c); the rest is in pyproject.toml.

``optional=True``: without a C compiler the build goes on without it and the package is
pure Python (same keys, slower; iri_scrapy.core.native).  abi3: one wheel per platform
serves every Python from 3.10.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "iri_scrapy.core._fastpath",
            # _iripath.c: IRIs mapped to URIs; _batch.c: dedupe as a batch
            ["iri_scrapy/core/_fastpath.c", "iri_scrapy/core/_iripath.c",
             "iri_scrapy/core/_batch.c"],
            depends=["iri_scrapy/core/_fastpath.h"],
            define_macros=[("Py_LIMITED_API", "0x030A0000")],
            py_limited_api=True,
            optional=True,
        )
    ],
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
