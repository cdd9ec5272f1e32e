"""Integrations with other engines (Apache Spark); each imported only by whoever uses it."""
