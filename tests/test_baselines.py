"""The paper's baselines over hand-made jobs whose answers are known, and over a simulated one."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from l4.baselines import (
    error_count_ranking,
    error_level_events,
    error_time_ranking,
    fallback_mask,
    is_error_line,
    line_time,
)
from l4.ingest import JobError
from l4.sim.simulate import simulate_case


def make_job(root: Path, nodes: dict[str, list[str]], gz: tuple[str, ...] = ()) -> Path:
    (root / "logs").mkdir(parents=True)
    (root / "job.json").write_text(json.dumps({"job_id": "j1", "status": "failed"}))
    for node, lines in nodes.items():
        data = ("\n".join(lines) + "\n").encode()
        if node in gz:
            (root / "logs" / f"{node}.log.gz").write_bytes(gzip.compress(data))
        else:
            (root / "logs" / f"{node}.log").write_bytes(data)
    return root


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "[2024-05-01 12:00:00,123] [ERROR] [launch.py:434:sigkill_handler] exits with return code = 1",
    "Traceback (most recent call last):",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "host:1:2 [0] misc/socket.cc:30 NCCL WARN socketProgressOpt: Call to recv from 10.0.0.1<5> failed : Connection reset by peer",
    "[rank3]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation timeout",
    "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out.",
    "slurmstepd: error: *** STEP 1.0 ON n1 CANCELLED AT 2024-01-01T00:00:00 ***",
    "pretrain_gpt.py FAILED",
    "[Error]: The execution of the internal task times out.",
])
def test_error_lines(line):
    assert is_error_line(line)


@pytest.mark.parametrize("line", [
    " iteration      120/  50000 | consumed samples: 1 | lm loss: 2.3E+00 |",
    "[2024-05-01 12:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=120, skipped=0",
    "host:1:2 [0] NCCL INFO comm 0x1 rank 3 nranks 8 - Init COMPLETE",
    "  error_file: <N/A>",
    "[W socket.cpp:752] [c10d] The client socket cannot be initialized",
])
def test_not_error_lines(line):
    assert not is_error_line(line)


def test_line_time_formats():
    assert line_time("[2024-05-01 12:00:00,500] x", None) == (1714564800.5, True)
    assert line_time("2024-05-01T12:00:00.250000000Z [rank0]:x", None)[0] == pytest.approx(1714564800.25)
    assert line_time("[Wed May 01 12:00:01 2024] NVRM: Xid", None) == (1714564801.0, True)
    # year-less stamps need the year from an earlier line of the file
    assert line_time("[E501 12:00:02.000000000 ProcessGroupNCCL.cpp:607] x", None) == (None, False)
    assert line_time("[E501 12:00:02.000000000 ProcessGroupNCCL.cpp:607] x", 2024) == (1714564802.0, False)
    assert line_time("May  1 12:00:03 host kernel: NVRM: Xid", 2024) == (1714564803.0, False)
    assert line_time("no time here", 2024) == (None, False)


@pytest.fixture
def job(tmp_path: Path) -> Path:
    return make_job(tmp_path / "job", {
        # a victim: many errors, all after the culprit's (real) failure, clock 2 s behind
        "node-a": [
            "[2024-05-01 12:00:00,000] [INFO] start",
            "[2024-05-01 12:00:05,000] [INFO] step=1",
            "[rank0]:[E501 12:00:09.000000000 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout",
            "[rank1]:[E501 12:00:09.100000000 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout",
            "[rank2]:[E501 12:00:09.200000000 ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog caught collective operation timeout",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        ],
        # the culprit: one error, the earliest one
        "node-b": [
            "[2024-05-01 12:00:00,000] [INFO] start",
            "[2024-05-01 12:00:08,000] [INFO] step=1",
            "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        ],
        # healthy
        "node-c": ["[2024-05-01 12:00:00,000] [INFO] start", "[2024-05-01 12:00:05,000] [INFO] step=1"],
        # an error before any timestamp (undated), gzip-compressed
        "node-d": ["Traceback (most recent call last):", "ValueError: bad"],
    }, gz=("node-d",))


def test_error_time_ranking(job):
    # node-b's undated RuntimeError inherits 12:00:08 from the line above: earlier than node-a
    assert error_time_ranking(job) == ["node-b", "node-a", "node-d", "node-c"]


def test_error_count_ranking(job):
    assert error_count_ranking(job) == ["node-a", "node-d", "node-b", "node-c"]


def test_error_level_events(job):
    events = error_level_events(job)
    by_count = {e["template"]: e for e in events}
    assert sum(e["count"] for e in events) == 4 + 1 + 2
    wd = [e for e in events if "Watchdog caught" in e["template"]]
    assert len(wd) == 1 and wd[0]["count"] == 3 and wd[0]["nodes"] == ["node-a"]
    ex = wd[0]["examples"][0]
    assert ex["file"] == "logs/node-a.log" and ex["line"] == 3 and ex["node"] == "node-a"
    assert "[Rank 0] Watchdog" in ex["text"]
    assert events[0] is wd[0]  # most frequent first
    assert all(e["nodes"] == sorted(e["nodes"]) for e in by_count.values())
    gz = [e for e in events if e["nodes"] == ["node-d"]]
    assert {x["file"] for e in gz for x in e["examples"]} == {"logs/node-d.log.gz"}


def test_ties_keep_listing_order(tmp_path):
    job = make_job(tmp_path / "j", {"n2": ["x failed"], "n1": ["x failed"], "n3": ["fine"]})
    assert error_count_ranking(job) == ["n1", "n2", "n3"]
    assert error_time_ranking(job) == ["n1", "n2", "n3"]


def test_missing_job_is_a_clear_error(tmp_path):
    with pytest.raises(JobError, match="does not exist"):
        error_count_ranking(tmp_path / "nope")


def test_fallback_mask():
    assert fallback_mask("rank 12 at 0x7f00aa failed in 3.5s") == "rank <*> at <*> failed in <*>"


def test_on_a_simulated_job(tmp_path):
    truth = simulate_case(tmp_path, 21, framework="deepspeed", fault="cuda_oom", n_nodes=5,
                          iterations=40, n_baselines=0)
    failed = tmp_path / "failed"
    nodes = sorted(p.name.split(".")[0] for p in (failed / "logs").rglob("*") if p.is_file())
    for ranking in (error_time_ranking(failed), error_count_ranking(failed)):
        assert sorted(ranking) == nodes
    events = error_level_events(failed)
    assert any("CUDA out of memory" in e["template"] for e in events)
    for e in events[:10]:
        for x in e["examples"]:
            path = failed / x["file"]
            lines = (gzip.open(path, "rt") if path.name.endswith(".gz") else open(path)).read().split("\n")
            assert lines[x["line"] - 1] == x["text"]
    assert truth["faulty_nodes"][0] in nodes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.sampled_from([
    "ok line", "ERROR: boom", "RuntimeError: x", "step 3 failed", "warning only", "Traceback (most recent call last):",
    "[2024-01-01 00:00:01,000] info", "[2024-01-01 00:00:02,000] [ERROR] late",
]), max_size=12), min_size=1, max_size=5))
def test_counts_match_keyword_rule(tmp_path_factory, files):
    root = tmp_path_factory.mktemp("h")
    job = make_job(root / "j", {f"n{i}": lines for i, lines in enumerate(files)})
    expected = {f"n{i}": sum(is_error_line(x) for x in lines) for i, lines in enumerate(files)}
    ranking = error_count_ranking(job)
    assert sorted(ranking) == sorted(expected)
    counts = [expected[n] for n in ranking]
    assert counts == sorted(counts, reverse=True)
    assert sum(e["count"] for e in error_level_events(job)) == sum(expected.values())
    assert sorted(error_time_ranking(job)) == sorted(expected)
