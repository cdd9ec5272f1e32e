"""The ``demo`` Scrapy project: crawl the iri_scrapy demo web with the plugin on."""
