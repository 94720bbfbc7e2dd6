"""Pair tier: Kafka messages (header fields, lazily decoded bodies) paired by correlation id.

Imports the ingest and decode tiers and the base modules; never `present/` or the CLI.
"""
