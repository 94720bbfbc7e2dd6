"""Decode tier: Kafka frames to values and annotated trees (schema, plans, interpreter, tree).

Imports the base modules and `kdissect.dissectors` (per-API meaning, also this tier);
never the pair tier, `present/` or the CLI.
"""
