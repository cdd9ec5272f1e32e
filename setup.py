"""The optional native extensions (iri_scrapy/core/_fastpath.c, with the IRI path in
_iripath.c, dedupe as a batch in _batch.c and its alias rungs in _aliases.c; and the
protocol level's page fingerprint cutter, iri_scrapy/protocol/_blocks.c, when that
optional folder is there); the rest is in pyproject.toml.

``optional=True``: without a C compiler the build goes on without it and the package is
pure Python (same keys, slower; iri_scrapy.core.native).  abi3: one wheel per platform
serves every Python from 3.10.
"""

from pathlib import Path

from setuptools import Extension, setup

BLOCKS = "iri_scrapy/protocol/_blocks.c"

setup(
    ext_modules=[
        Extension(
            "iri_scrapy.core._fastpath",
            # _iripath.c: IRIs mapped to URIs; _batch.c: dedupe as a batch, with the
            # alias rungs of _aliases.c
            ["iri_scrapy/core/_fastpath.c", "iri_scrapy/core/_iripath.c",
             "iri_scrapy/core/_batch.c", "iri_scrapy/core/_aliases.c"],
            depends=["iri_scrapy/core/_fastpath.h", "iri_scrapy/core/_blake2b.h"],
            define_macros=[("Py_LIMITED_API", "0x030A0000")],
            py_limited_api=True,
            optional=True,
        ),
        *([Extension(
            "iri_scrapy.protocol._blocks",
            [BLOCKS],
            depends=["iri_scrapy/core/_blake2b.h"],
            define_macros=[("Py_LIMITED_API", "0x030A0000")],
            py_limited_api=True,
            optional=True,
        )] if (Path(__file__).parent / BLOCKS).exists() else []),
    ],
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
