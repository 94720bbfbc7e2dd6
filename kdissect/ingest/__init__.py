"""Ingest tier: capture files to Kafka frames (capture -> net -> reassembly -> framing).

Imports only the base modules (`kdissect.notes`, `kdissect.apis`); nothing above.
"""
