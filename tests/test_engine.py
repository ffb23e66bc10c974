"""The whole engine on hand-made jobs: contract, culprit vs victims, odd inputs."""

import json

import pytest

from conftest import XID79, megatron_node, write_job, xid_job
from l4.engine import diagnose

CONTRACT = {"job_id": str, "stage": str, "nodes": list, "iterations": list, "events": list,
            "root_causes": list}


def check_contract(report: dict, n_nodes: int) -> None:
    json.dumps(report)  # serialisable
    for key, typ in CONTRACT.items():
        assert isinstance(report[key], typ), key
    assert len(report["nodes"]) == n_nodes
    scores = [n["score"] for n in report["nodes"]]
    assert scores == sorted(scores, reverse=True)
    for it in report["iterations"]:
        assert isinstance(it["iteration"], int) and isinstance(it["score"], float)
    for ev in report["events"]:
        assert {"template", "score", "nodes", "count", "examples"} <= set(ev)
        for ex in ev["examples"]:
            assert isinstance(ex["line"], int) and ex["line"] >= 1
            assert not ex["file"].startswith("/")


def test_culprit_beats_its_louder_victims(xid_case):
    failed, bases = xid_case
    report = diagnose(failed, bases)
    check_contract(report, 4)
    assert report["nodes"][0]["node"] == "node-2"
    top = report["events"][0]
    assert "fallen off the bus" in top["template"] and top["nodes"] == ["node-2"]
    ex = top["examples"][0]
    line = (failed / ex["file"]).read_text().splitlines()[ex["line"] - 1]
    assert XID79 in line
    assert report["stage"] == "training"
    assert report["iterations"][0]["iteration"] == 410
    assert report["baseline"]["used"] and len(report["baseline"]["jobs"]) == 2


def test_without_baseline_still_diagnoses(xid_case):
    failed, _ = xid_case
    report = diagnose(failed)
    check_contract(report, 4)
    assert report["baseline"]["used"] is False
    assert report["nodes"][0]["node"] == "node-2"
    assert any("no baseline" in w for w in report["warnings"])


def test_frequency_not_just_presence(tmp_path):
    """An event healthy jobs log 3 times is still suspicious at 3,000 times on one node."""
    warn = "NCCL WARN NET/IB : Got async event : port error"
    healthy = {f"n{i}": megatron_node(30, rank=i, prints_iters=i == 2) + f"{warn}\n" * 3
               for i in range(3)}
    base = write_job(tmp_path / "base", healthy, status="succeeded")
    noisy = dict(healthy)
    noisy["n1"] = healthy["n1"] + f"{warn}\n" * 3000
    failed = write_job(tmp_path / "failed", noisy)
    report = diagnose(failed, [base])
    assert report["nodes"][0]["node"] == "n1"
    assert any("port error" in e["template"] for e in report["events"])


def test_odd_jobs_do_not_crash(tmp_path):
    one = write_job(tmp_path / "one", {"solo": megatron_node(
        20, rank=0, prints_iters=True, fail_at=12,
        fail_lines=("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",))})
    report = diagnose(one)
    check_contract(report, 1)
    assert any("out of memory" in e["template"] for e in report["events"])

    mixed = write_job(
        tmp_path / "mixed",
        {"gz": megatron_node(20, rank=0, prints_iters=True),
         "empty": "",
         "latin": "caf\xe9 failed: Input/output error\n".encode("latin-1"),
         "tb": "Traceback (most recent call last):\n  File \"/a.py\", line 1, in <module>\n"
               "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error\n"},
        gz=("gz",),
    )
    report = diagnose(mixed)
    check_contract(report, 4)
    warnings = " ".join(report["warnings"])
    assert "empty" in warnings and "UTF-8" in warnings
    assert {f["status"] for f in report["files"]} >= {"ok", "empty"}


def test_baseline_of_another_configuration_is_refused(tmp_path):
    failed = xid_job(tmp_path / "failed")
    other = xid_job(tmp_path / "other", healthy=True, config_id="cfg-other")
    report = diagnose(failed, [other])
    assert report["baseline"]["used"] is False
    assert any("cfg-other" in w for w in report["warnings"])


def test_template_ids_are_stable_across_jobs(tmp_path):
    a = diagnose(xid_job(tmp_path / "a"))
    b = diagnose(xid_job(tmp_path / "b", culprit=1, seed=5))
    ida = {e["template"]: e["event_id"] for e in a["events"]}
    idb = {e["template"]: e["event_id"] for e in b["events"]}
    shared = set(ida) & set(idb)
    assert shared and all(ida[t] == idb[t] for t in shared)


@pytest.mark.parametrize("n_nodes,culprit", [(2, 0), (8, 5)])
def test_scales_of_node_counts(tmp_path, n_nodes, culprit):
    failed = xid_job(tmp_path / "f", n_nodes=n_nodes, culprit=culprit)
    base = xid_job(tmp_path / "b", n_nodes=n_nodes, healthy=True, seed=3)
    report = diagnose(failed, [base])
    assert report["nodes"][0]["node"] == f"node-{culprit}"


def test_framing_lines_are_context_not_events(tmp_path):
    """Separators, blank lines and Python's traceback and chaining headers frame an error;
    the exception lines are the events."""
    tb = ("=" * 40 + "\n" + "Traceback (most recent call last):\n"
          '  File "/srv/train.py", line 9, in <module>\n    main()\n'
          "ValueError: bad shard 3\n\n"
          "During handling of the above exception, another exception occurred:\n\n"
          "Traceback (most recent call last):\n"
          '  File "/srv/train.py", line 12, in <module>\n    cleanup()\n'
          "RuntimeError: cleanup failed after bad shard\n" + "-" * 40 + "\n")
    nodes = {f"n{r}": megatron_node(20, rank=r, prints_iters=True) for r in range(4)}
    base = write_job(tmp_path / "ok", dict(nodes), status="succeeded")
    nodes["n2"] = megatron_node(20, rank=2, prints_iters=True, fail_at=12) + tb
    report = diagnose(write_job(tmp_path / "failed", nodes), [base])
    templates = [e["template"] for e in report["events"]]
    assert any(t.startswith("ValueError: bad shard") for t in templates)
    assert any(t.startswith("RuntimeError: cleanup failed") for t in templates)
    assert not any(t.startswith(("Traceback", "During handling", "===", "---", "<EMPTY>"))
                   for t in templates)
