"""Fingerprint storage and dedupe decisions, shared by the plugin, the CLI and Spark.

Imports the core only: no Scrapy.
"""
