"""Which of the culprit's own lines say what went wrong.

Three things any failed job shows, whatever its framework:

* a line the culprit printed and then worked past (a start-up warning hours before the
  end) is not where its trouble began, however error-like it reads: the engine lists
  such events in the report's ``onset.worked_past`` and the matcher skips them;
* the culprit's own launcher notices ("srun: error: <host>: task 0: Exited with exit code
  1", "Sending process 4002 closing signal SIGTERM") only say that something failed, so
  they weigh as echoes, while "Received SIGTERM death signal" (a signal from outside)
  still counts as the culprit's.

The category tests use the real library and the real MiniLM model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from l4 import rootcause
from tests.bar_jobs import diagnose_three_nodes

KEEPALIVE = ("W0222 02:12:31.692243 3457800 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:1134] "
             "The node 'w5_3457800_0' has failed to send a keep-alive heartbeat to the rendezvous "
             "'llm-8721752' due to an error of type RendezvousTimeoutError.")
NAN = ("AssertionError: Rank 41: found NaN in local grad norm in backward pass before data-parallel "
       "communication collective. Device: 1, node: w5")
SIGTERM = ("W0222 05:15:45.932827 3457800 torch/distributed/elastic/multiprocessing/api.py:897] "
           "Sending process 252380 closing signal SIGTERM")
EXITED = ("E0222 05:15:46.932827 3457800 torch/distributed/elastic/multiprocessing/api.py:869] "
          "failed (exitcode: 1) local_rank: 1 (pid: 252381) of binary: /usr/bin/python3")
TIMEOUT = ("[E ProcessGroupNCCL.cpp:630] [Rank 8] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=68001, OpType=ALLREDUCE) ran for 1800000 milliseconds before timing out.")


def _event(eid: str, text: str, node: str, line: int, score: float, symptom: bool = False) -> dict:
    return {"event_id": eid, "template": text, "score": score, "count": 1, "nodes": [node],
            "symptom": symptom, "examples": [{"file": f"logs/{node}.log", "line": line, "node": node,
                                              "text": text}]}


def _nan_report() -> list[dict]:
    """The culprit w5 warned about a keep-alive at start-up (line 5), trained for hours,
    then raised the NaN assertion (line 80) and tore its workers down; w1 timed out."""
    return [
        _event("timeout", TIMEOUT, "w1", 78, 2.2, symptom=True),
        _event("sigterm", SIGTERM, "w5", 81, 2.17),
        _event("exited", EXITED, "w5", 88, 1.92),
        _event("keepalive", KEEPALIVE, "w5", 5, 1.92),
        _event("nan", NAN, "w5", 80, 1.5),
    ]


ONSET = {"node": "w5", "file": "logs/w5.log", "line": 80, "worked_past": ["keepalive"]}


def test_a_line_the_culprit_worked_past_is_not_its_first_trouble() -> None:
    events = _nan_report()
    ids = [e["event_id"] for e in events]
    assert rootcause._first_trouble(events, "w5") == {ids.index("keepalive")}
    assert rootcause._first_trouble(events, "w5", ONSET) == {ids.index("nan")}
    # the failure point of another node says nothing about this one's lines
    assert rootcause._first_trouble(events, "w5", {**ONSET, "node": "w1"}) == {ids.index("keepalive")}


def test_the_culprits_cause_not_its_start_up_warning_decides(kb: Path) -> None:
    m = rootcause.match_events(_nan_report(), kb=kb, top="w5", onset=ONSET)
    assert m.categories[0]["category"] == "user", m.categories
    assert m.categories[0]["confidence"] > 0.8, m.categories
    assert m.root_causes[0]["pattern_id"] == "loss-nan-grad-norm", m.root_causes[:2]
    # read from its start-up warning (a rendezvous keep-alive: platform), the culprit's
    # category is a coin toss
    blind = rootcause.match_events(_nan_report(), kb=kb, top="w5").categories
    assert blind[0]["confidence"] - blind[1]["confidence"] < 0.3, blind


def test_the_culprits_teardown_weighs_as_an_echo(monkeypatch: pytest.MonkeyPatch) -> None:
    events = _nan_report()
    assert rootcause._role(events[1], "w5") == "symptom"  # closing signal SIGTERM
    assert rootcause._role(events[2], "w5") == "symptom"  # failed (exitcode: 1)
    assert rootcause._role(events[4], "w5") == "culprit"  # its own assertion
    outside = _event("death", "Received Signals.SIGTERM death signal, shutting down workers", "w5", 90, 1.0)
    assert rootcause._role(outside, "w5") == "culprit"  # a signal from outside is a statement
    srun = _event("srun", "srun: error: gpu-dgx-029: task 0: Exited with exit code 1", "w5", 30, 1.0)
    assert rootcause._role(srun, "w5") == "symptom"
    monkeypatch.setattr(rootcause, "TEARDOWN_AS_ECHO", False)
    assert rootcause._role(events[1], "w5") == "culprit"


XLA_OOM = ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
           "allocate 13256204288 bytes.")


def test_an_out_of_memory_line_outvotes_srun_s_exit_notice(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm's "task 0: Exited with exit code 1" is quoted only by Slurm's own (platform)
    patterns in the library, so it reads as platform; it is the culprit's launcher saying
    that its task failed, and the task's own out-of-memory line names the owner."""
    events = [_event("oom", XLA_OOM, "n29", 27, 3.0),
              _event("srun", "srun: error: n29: task 0: Exited with exit code 1", "n29", 28, 2.5)]
    onset = {"node": "n29", "file": "logs/n29.log", "line": 27, "worked_past": []}
    m = rootcause.match_events(events, kb=kb, top="n29", onset=onset)
    assert m.categories[0]["category"] == "user", m.categories
    monkeypatch.setattr(rootcause, "TEARDOWN_AS_ECHO", False)
    before = rootcause.match_events(events, kb=kb, top="n29", onset=onset)
    assert before.categories[0]["category"] == "platform", before.categories


def _write(path: Path, failed: bool, role: str) -> None:
    """Every node trains 300 steps; the crashing node warned once at start-up (and worked
    on for 240 steps), then raised the NaN assertion; its peers timed out."""
    path.parent.mkdir(parents=True, exist_ok=True)
    last = 240 if failed else 300
    lines = ["2024-02-22 02:12:30,000 INFO launching rank 0 of 6"]
    if failed and role == "crash":
        lines.append("2024-02-22 02:12:31,000 WARNING " + KEEPALIVE[KEEPALIVE.index("The node"):])
    for n in range(1, last + 1):
        lines.append(f"2024-02-22 {2 + n // 60:02d}:{n % 60:02d}:40,000 INFO iteration {n}/300 | lm loss: 2.31")
    if failed and role == "crash":
        lines += ["2024-02-22 07:00:41,000 ERROR " + NAN, "2024-02-22 07:00:42,000 WARNING " + SIGTERM]
    elif failed:
        lines.append("2024-02-22 07:30:40,000 ERROR " + TIMEOUT)
    else:
        lines.append("2024-02-22 07:30:40,000 INFO training finished")
    path.write_text("\n".join(lines) + "\n")


def test_the_report_lists_what_the_culprit_worked_past(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _write)
    assert rep["nodes"][0]["node"] == "node-1"
    onset = rep["onset"]
    by_id = {e["event_id"]: e["template"] for e in rep["events"]}
    past = [by_id.get(e, "") for e in onset["worked_past"]]
    assert any("keep-alive" in t for t in past), (onset, by_id)
    assert not any("NaN" in t for t in past)
    first = rootcause._first_trouble(rep["events"], "node-1", onset)
    assert ["NaN" in rep["events"][i]["template"] for i in first] == [True], (first, rep["events"])
