"""``python -m iri_scrapy.testing [--port N]``: serve the demo alias web (see server.py)."""

from iri_scrapy.testing.server import main

if __name__ == "__main__":
    raise SystemExit(main())
