"""The Capture object itself: chunked building, memory behaviour, Jupyter views."""

from __future__ import annotations

import pandas as pd
import pytest

import kdissect
from kdissect.present import analysis
from tests.conftest import CAPTURES

QUORUM = CAPTURES / "quorum_story.pcap"


def test_fields_built_in_chunks_equal_fields_built_at_once(monkeypatch: pytest.MonkeyPatch):
    whole = kdissect.read_pcap(QUORUM).fields
    monkeypatch.setattr(analysis, "FIELDS_CHUNK_ROWS", 97)
    chunked = kdissect.read_pcap(QUORUM).fields
    assert len(whole) > 97 * 10
    pd.testing.assert_frame_equal(chunked, whole, check_exact=True)


def test_tables_do_not_keep_the_trees_they_decode():
    capture = kdissect.read_pcap(QUORUM)
    assert len(capture.fields) and len(capture.quorum_replicas)
    assert all(message._tree is None for message in capture.message_list)
    tree = capture.tree(28)  # asking for one tree keeps that one
    assert capture.message(28)._tree is tree


def test_jupyter_views_render():
    capture = kdissect.read_pcap(QUORUM)
    html = capture._repr_html_()
    assert "50 Kafka messages on 6 connections" in html and "<table" in html
    tree_html = capture.message(28)._repr_html_()
    assert "<details" in tree_html and "HighWatermark" in tree_html
    assert "kd-gen" in tree_html  # generated nodes are marked
    assert "Capture quorum_story.pcap" in repr(capture)


def test_read_pcap_filters_apis_and_takes_extra_ports():
    capture = kdissect.read_pcap(QUORUM, apis=[55], ports=[19092])
    assert set(capture.messages.api_key.dropna()) == {55}
    assert len(capture) == 32
