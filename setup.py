"""The optional native fast path (iri_scrapy/core/_fastpath.c, and the IRI path in
_iripath.c, one extension); the rest is in pyproject.toml.

``optional=True``: without a C compiler the build goes on without it and the package is
pure Python (same keys, slower; iri_scrapy.core.native).  abi3: one wheel per platform
serves every Python from 3.10.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "iri_scrapy.core._fastpath",
            ["iri_scrapy/core/_fastpath.c", "iri_scrapy/core/_iripath.c"],
            define_macros=[("Py_LIMITED_API", "0x030A0000")],
            py_limited_api=True,
            optional=True,
        )
    ],
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
