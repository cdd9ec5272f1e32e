"""The ``iri-scrapy`` command line: ``main`` parses and dispatches, ``spark`` runs
``dedupe --spark``.  Imports the core and the store (pyspark only for ``--spark``)."""
