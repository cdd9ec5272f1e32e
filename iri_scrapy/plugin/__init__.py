"""The Scrapy plugin's components: fingerprinter, dupefilter, middlewares, link
extractor, media pipelines, and ``compat`` (every Scrapy seam without a public API).

Imports the core, the store and Scrapy; never the frontier, the add-on or the CLI.
"""
