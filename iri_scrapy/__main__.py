"""``python -m iri_scrapy``: the ``iri-scrapy`` command line (see :mod:`iri_scrapy.cli.main`)."""

from __future__ import annotations

from iri_scrapy.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
