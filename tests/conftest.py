"""Shared pytest configuration."""

pytest_plugins = ["tests.redis_support"]
