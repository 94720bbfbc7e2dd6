"""Decode tier: Kafka frames to flat values, and to annotated trees when asked.

    schema/        definitions -> checked model -> per-version plans
    generated.py   plans compiled into Python that reads flat values (the fast path)
    values.py      a frame's body as flat values: generated decoder, or read off a tree
    interpreter.py the reference: plan + bytes -> annotated Node tree, for any input
    dissect.py     whole frames (frame, header, body) to trees; tree.py the Node
    rows.py        the tree laid out as plain tuples from flat values (-V and JSON)

Imports the base modules and `kdissect.dissectors` (per-API meaning, also this
tier); never the pair tier, `present/` or the CLI (tests/test_layering.py).
"""
