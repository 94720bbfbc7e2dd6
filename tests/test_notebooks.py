"""Both notebooks run top to bottom on the shipped captures, draw their plots and get it right.

Each notebook is executed by nbclient in a fresh python3 kernel, from the
notebooks/ directory (its paths are relative to it), with matplotlib's Agg
backend. One extra cell appended to the executed copy prints the notebook's
answer tables as JSON; they are compared with answers worked out here from
the sidecars, which record what the scripted peer really sent.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell

import kdissect

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
PRODUCERS, QUORUM = "producer_analysis.ipynb", "quorum_analysis.ipynb"
ANSWERS_MARK = "ANSWERS "


# -- running a notebook ----------------------------------------------------------------

def answers_cell(frames: list[str], values: list[str]) -> str:
    """Source of a cell printing the named DataFrames (as records) and values as JSON."""
    tables = ", ".join(f'"{name}": {name}' for name in frames)
    scalars = ", ".join(f'"{name}": {name}' for name in values)
    return (
        "import json as _json\n"
        f"_tables = {{{tables}}}\n"
        "_answers = {name: _json.loads(frame.reset_index().to_json(\n"
        "    orient='records', date_format='iso', date_unit='us'))\n"
        "    for name, frame in _tables.items()}\n"
        f"_answers.update({{{scalars}}})\n"
        f"print({ANSWERS_MARK!r} + _json.dumps(_answers, default=str))\n"
    )


def execute(name: str, extra: str | None = None, capture: str | None = None) -> NotebookNode:
    """Run a notebook (outputs cleared first), optionally pointed at another capture."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    if capture is not None:
        setup = next(cell for cell in notebook.cells if "CAPTURE = " in cell.source)
        lines = [f'CAPTURE = "{capture}"' if line.startswith("CAPTURE = ") else line
                 for line in setup.source.splitlines()]
        setup.source = "\n".join(lines)
    if extra is not None:
        notebook.cells.append(new_code_cell(extra))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MPLBACKEND", "Agg")
        patch.setenv("PYTHONPATH", os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
        NotebookClient(notebook, kernel_name="python3", timeout=60,
                       resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return notebook


def outputs(notebook: NotebookNode) -> Iterator[NotebookNode]:
    for cell in notebook.cells:
        if cell.cell_type == "code":
            yield from cell.outputs


def answers(notebook: NotebookNode) -> dict[str, Any]:
    printed = [line for output in outputs(notebook) if output.output_type == "stream"
               for line in output.text.splitlines() if line.startswith(ANSWERS_MARK)]
    assert len(printed) == 1
    found: dict[str, Any] = json.loads(printed[0][len(ANSWERS_MARK):])
    return found


def png_count(notebook: NotebookNode) -> int:
    return sum("image/png" in output.get("data", {}) for output in outputs(notebook))


@pytest.fixture(scope="module")
def producer_run() -> NotebookNode:
    return execute(PRODUCERS, answers_cell(
        ["writers", "epoch_bumps", "open_transactions", "failed"], []))


@pytest.fixture(scope="module")
def quorum_run() -> NotebookNode:
    return execute(QUORUM, answers_cell(
        ["leader_changes", "progress", "lag_table", "stale_fetchers", "membership", "listeners"],
        ["LAG_THRESHOLD", "STALE_AFTER"]))


# -- what the peer sent ------------------------------------------------------------------

def sidecar(name: str) -> dict[str, Any]:
    return json.loads((ROOT / "captures" / f"{name}.json").read_text())


def steps(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [exchange for exchange in document["exchanges"] if "step" in exchange]


def response_times(pcap: str, document: dict[str, Any]) -> list[str]:
    """Capture time of each step's response, ISO as the notebooks print it."""
    exchanges = kdissect.read_pcap(ROOT / "captures" / pcap).exchanges
    by_key = {(int(str(client).rsplit(":", 1)[1]), int(correlation)): time
              for client, correlation, time in zip(exchanges.client, exchanges.correlation_id,
                                                   exchanges.response_time, strict=True)}
    return [iso(by_key[(step["client_port"], step["correlation_id"])])
            for step in steps(document)]


def iso(moment: pd.Timestamp) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def producer_states(document: dict[str, Any]) -> Iterator[tuple[int, str, int, dict]]:
    for index, step in enumerate(steps(document)):
        for topic in step["response"]["Topics"]:
            for partition in topic["Partitions"]:
                for state in partition["ActiveProducers"]:
                    yield index, topic["Name"], partition["PartitionIndex"], state


def quorum_partitions(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [step["response"]["Topics"][0]["Partitions"][0] for step in steps(document)]


# -- every notebook --------------------------------------------------------------------------

@pytest.mark.parametrize(("run", "plots"), [("producer_run", 3), ("quorum_run", 4)])
def test_notebook_runs_clean_and_draws_its_plots(run: str, plots: int,
                                                 request: pytest.FixtureRequest) -> None:
    notebook = request.getfixturevalue(run)
    kinds = [output.output_type for output in outputs(notebook)]
    assert "error" not in kinds
    assert not [o.text for o in outputs(notebook) if o.output_type == "stream" and o.name == "stderr"]
    assert png_count(notebook) == plots
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count for cell in code)


@pytest.mark.parametrize("name", [PRODUCERS, QUORUM])
def test_saved_notebook_carries_outputs_of_a_full_run(name: str) -> None:
    """What GitHub shows: every code cell executed in order, plots included, files kept small."""
    path = NOTEBOOKS / name
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))
    assert all(cell.outputs for cell in code)
    assert "error" not in [output.output_type for output in outputs(notebook)]
    assert png_count(notebook) >= 3
    assert path.stat().st_size < 400_000
    assert str(ROOT) not in path.read_text()  # no path of the machine that ran it


@pytest.mark.parametrize(("name", "other", "api"), [
    (PRODUCERS, "../captures/quorum_story.pcap", "DescribeProducers"),
    (QUORUM, "../captures/producers_story.pcap", "DescribeQuorum"),
])
def test_notebook_pointed_at_a_capture_without_its_api_says_so(name: str, other: str,
                                                               api: str) -> None:
    with pytest.raises(CellExecutionError, match=f"no {api} answers in {other}"):
        execute(name, capture=other)


# -- producer_analysis.ipynb -------------------------------------------------------------------

def test_producer_notebook_names_who_writes_where(producer_run: NotebookNode) -> None:
    expected: dict[tuple[int, str, int], set[int]] = defaultdict(set)
    for _, topic, partition, state in producer_states(sidecar("producers_story")):
        expected[(state["ProducerId"], topic, partition)].add(state["ProducerEpoch"])
    writers = answers(producer_run)["writers"]
    assert {(w["producer_id"], w["topic_name"], w["partition_index"]): set(w["epochs"])
            for w in writers} == expected
    assert len(writers) == len(expected) == 8


def test_producer_notebook_finds_the_epoch_bump_of_3002(producer_run: NotebookNode) -> None:
    document = sidecar("producers_story")
    times = response_times("producers_story.pcap", document)
    last: dict[tuple[int, str, int], dict[str, Any]] = {}
    expected = set()
    for index, topic, partition, state in producer_states(document):
        key = (state["ProducerId"], topic, partition)
        before = last.get(key)
        if before is not None and before["ProducerEpoch"] != state["ProducerEpoch"]:
            expected.add((times[index], *key, before["ProducerEpoch"], state["ProducerEpoch"],
                          before["LastSequence"], state["LastSequence"]))
        last[key] = state
    found = {(b["time"], b["producer_id"], b["topic_name"], b["partition_index"], b["previous_epoch"],
              b["producer_epoch"], b["previous_sequence"], b["last_sequence"])
             for b in answers(producer_run)["epoch_bumps"]}
    assert found == expected
    assert {bump[1] for bump in found} == {3002}


def test_producer_notebook_finds_the_transaction_left_open(producer_run: NotebookNode) -> None:
    document = sidecar("producers_story")
    times = response_times("producers_story.pcap", document)
    seen: dict[tuple[int, str, int, int], list[int]] = defaultdict(list)
    for index, topic, partition, state in producer_states(document):
        if state["CurrentTxnStartOffset"] != -1:
            key = (state["ProducerId"], topic, partition, state["CurrentTxnStartOffset"])
            seen[key].append(index)
    final = len(times) - 1
    expected = {(*key, len(indexes), times[indexes[0]], times[indexes[-1]], indexes[-1] == final)
                for key, indexes in seen.items()}
    found = {(t["producer_id"], t["topic_name"], t["partition_index"], t["current_txn_start_offset"],
              t["responses"], t["first_seen"], t["last_seen"], t["still_open_at_end"])
             for t in answers(producer_run)["open_transactions"]}
    assert found == expected
    assert {(t[0], t[3]) for t in found} == {(7001, 1520), (7001, 860)}


def test_producer_notebook_lists_the_partition_errors(producer_run: NotebookNode) -> None:
    document = sidecar("producers_story")
    expected = [(topic["Name"], partition["PartitionIndex"], partition["ErrorMessage"])
                for step in steps(document) for topic in step["response"]["Topics"]
                for partition in topic["Partitions"] if partition["ErrorCode"]]
    failed = answers(producer_run)["failed"]
    assert [(f["topic_name"], f["partition_index"], f["error_message"]) for f in failed] == expected
    assert {f["partition_error"] for f in failed} == {"NOT_LEADER_OR_FOLLOWER"}


# -- quorum_analysis.ipynb ----------------------------------------------------------------------

def test_quorum_notebook_finds_the_leader_change(quorum_run: NotebookNode) -> None:
    document = sidecar("quorum_story")
    times = response_times("quorum_story.pcap", document)
    partitions = quorum_partitions(document)
    expected = [(times[index], before["LeaderId"], before["LeaderEpoch"], now["LeaderId"],
                 now["LeaderEpoch"])
                for index, (before, now) in enumerate(itertools.pairwise(partitions), start=1)
                if (before["LeaderId"], before["LeaderEpoch"]) != (now["LeaderId"],
                                                                   now["LeaderEpoch"])]
    found = [(c["time"], c["previous_leader"], c["previous_epoch"], c["leader_id"], c["leader_epoch"])
             for c in answers(quorum_run)["leader_changes"]]
    assert found == expected
    assert [change[1:] for change in found] == [(1, 7, 2, 8)]


def test_quorum_notebook_measures_high_watermark_progress(quorum_run: NotebookNode) -> None:
    watermarks = [p["HighWatermark"] for p in quorum_partitions(sidecar("quorum_story"))]
    progress = answers(quorum_run)["progress"]
    assert [row["high_watermark"] for row in progress] == watermarks
    assert [row["committed"] for row in progress] == [None] + [
        now - before for before, now in itertools.pairwise(watermarks)]


def lag_episodes(document: dict[str, Any], times: list[str],
                 threshold: int) -> list[tuple[Any, ...]]:
    """(voter, behind from, max lag, worst at, caught up at) from the encoded offsets.

    Lag as kafka-metadata-quorum describe --replication has it: the leader's log end
    offset minus the voter's.
    """
    lags: dict[int, list[int]] = defaultdict(list)
    for partition in quorum_partitions(document):
        leader_end = next(v["LogEndOffset"] for v in partition["CurrentVoters"]
                          if v["ReplicaId"] == partition["LeaderId"])
        for voter in partition["CurrentVoters"]:
            lags[voter["ReplicaId"]].append(leader_end - voter["LogEndOffset"])
    episodes = []
    for voter, history in sorted(lags.items()):
        index = 0
        while index < len(history):
            if history[index] <= threshold:
                index += 1
                continue
            start = index
            while index < len(history) and history[index] > threshold:
                index += 1
            worst = max(range(start, index), key=lambda i: history[i])
            episodes.append((voter, times[start], history[worst], times[worst],
                             times[index] if index < len(history) else None))
    return episodes


def test_quorum_notebook_lag_table_names_voter_3(quorum_run: NotebookNode) -> None:
    document = sidecar("quorum_story")
    found = answers(quorum_run)
    expected = lag_episodes(document, response_times("quorum_story.pcap", document),
                            found["LAG_THRESHOLD"])
    assert [(e["voter"], e["behind_from"], e["max_lag"], e["worst_at"], e["caught_up_at"])
            for e in found["lag_table"]] == expected
    assert [episode[0] for episode in expected] == [3]


def test_quorum_notebook_finds_the_stale_observer(quorum_run: NotebookNode) -> None:
    document = sidecar("quorum_story")
    times = response_times("quorum_story.pcap", document)
    found = answers(quorum_run)
    stale_after = pd.Timedelta(found["STALE_AFTER"])
    stale: dict[int, list[int]] = defaultdict(list)
    for index, partition in enumerate(quorum_partitions(document)):
        for replica in partition["CurrentVoters"] + partition["Observers"]:
            fetched = replica.get("LastFetchTimestamp", -1)
            age = pd.Timestamp(times[index]) - pd.Timestamp(fetched, unit="ms", tz="UTC")
            if fetched != -1 and age > stale_after:
                stale[replica["ReplicaId"]].append(index)
    expected = {(replica, times[indexes[0]], len(indexes)) for replica, indexes in stale.items()}
    assert {(s["replica_id"], s["stale_from"], s["responses"])
            for s in found["stale_fetchers"]} == expected
    assert set(stale) == {101}


def test_quorum_notebook_sees_observer_102_join(quorum_run: NotebookNode) -> None:
    partitions = quorum_partitions(sidecar("quorum_story"))
    listed = [{r["ReplicaId"] for r in p["CurrentVoters"] + p["Observers"]} for p in partitions]
    everyone = set().union(*listed)
    membership = {m["replica_id"]: m for m in answers(quorum_run)["membership"]}
    assert set(membership) == everyone
    assert {r for r, m in membership.items() if m["joined"]} == everyone - listed[0] == {102}
    assert {r for r, m in membership.items() if m["left"]} == everyone - listed[-1]


def test_quorum_notebook_lists_the_v2_controller_listeners(quorum_run: NotebookNode) -> None:
    nodes: dict[tuple[int, str, str, int], int] = defaultdict(int)
    for step in steps(sidecar("quorum_story")):
        for node in step["response"].get("Nodes", []):
            for listener in node["Listeners"]:
                nodes[(node["NodeId"], listener["Name"], listener["Host"], listener["Port"])] += 1
    found = {(n["node_id"], n["listener_name"], n["host"], n["port"]): n["responses"]
             for n in answers(quorum_run)["listeners"]}
    assert found == nodes
    assert len(found) == 3


@pytest.mark.parametrize("name", [PRODUCERS, QUORUM])
def test_notebooks_find_the_shipped_capture_from_any_directory(name: str, tmp_path: Path):
    """Started elsewhere (here an empty folder), the setup cell still finds its capture, and the
    first cell tells a reader how to point it at their own."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert "set `CAPTURE`" in notebook.cells[0].source
    setup = next(cell for cell in notebook.cells if "CAPTURE = " in cell.source)
    probe = nbformat.v4.new_notebook(cells=[
        new_code_cell(setup.source.split("plt.rcParams")[0]), new_code_cell("print(CAPTURE)")])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MPLBACKEND", "Agg")
        patch.setenv("PYTHONPATH", os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
        NotebookClient(probe, kernel_name="python3", timeout=60,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = Path(probe.cells[1].outputs[0].text.strip())
    assert printed.is_file() and printed.parent == ROOT / "captures"
