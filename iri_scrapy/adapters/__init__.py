"""Thin Scrapy adapters over the pure IRI core (the core never imports Scrapy)."""
