"""The iri_scrapy sample project: ``python -m sample_project`` (see README.md).

The Scrapy project itself is in ``demo/`` (``cd sample_project && scrapy crawl demo``);
:mod:`sample_project.run_demo` runs it twice and compares.
"""
