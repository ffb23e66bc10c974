"""The knowledge base reads the culprit's lines where the report says the culprit is.

A report's events are ordered by how unusual they are, not by whose they are: Slurm's
"srun: error: <host>: tasks 0-3: Aborted (core dumped)", printed on a victim's host after
the job fell apart, can head them while the node the engine ranks first printed the cause
(a module missing from its image) below.  The matcher must take the culprit from the
report's node ranking, not from the first event, or the victim's teardown is read as the
culprit's own line and its category wins.  (Which pattern the teardown line itself
resembles is another question: here it still heads the suggestions, as an out-of-memory
kill, because its wording shares Slurm's prefix with that pattern.)  Real library, real MiniLM model.
"""

from __future__ import annotations

from pathlib import Path

from l4 import rootcause
from l4.pipeline import attach_root_causes, top_node

SRUN = "srun: error: hgx-171: tasks 56-63: Aborted (core dumped)"
MISSING = "ModuleNotFoundError: No module named 'transformer_engine'"
TIMEOUT = ("[Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
           "OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds")


def _events() -> list[dict]:
    return [
        {"event_id": "1", "template": SRUN, "nodes": ["hgx-171"], "symptom": False, "count": 1,
         "examples": [{"node": "hgx-171", "file": "logs/hgx-171.log", "line": 80, "text": SRUN}]},
        {"event_id": "2", "template": TIMEOUT, "nodes": ["hgx-171", "hgx-172"], "symptom": True,
         "count": 8, "examples": [{"node": "hgx-171", "file": "logs/hgx-171.log", "line": 70,
                                   "text": TIMEOUT}]},
        {"event_id": "3", "template": MISSING, "nodes": ["hgx-174"], "symptom": False, "count": 1,
         "examples": [{"node": "hgx-174", "file": "logs/hgx-174.log", "line": 24, "text": MISSING}]},
    ]


def _report() -> dict:
    return {"job_id": "j", "stage": "initialization", "events": _events(),
            "nodes": [{"node": "hgx-174", "score": 0.78, "evidence": {"specific": 1.0}},
                      {"node": "hgx-171", "score": 0.16, "evidence": {}}]}


def test_roles_follow_the_reports_culprit() -> None:
    roles = {u.text: u.role for u in rootcause.units_from_events(_events(), top="hgx-174")}
    assert roles[SRUN] == "symptom" and roles[MISSING] == "culprit"
    # without the ranking, the first event that is not an echo stands in for the culprit
    guessed = {u.text: u.role for u in rootcause.units_from_events(_events())}
    assert guessed[SRUN] == "culprit" and guessed[MISSING] == "symptom"


def test_top_node_reads_the_ranking() -> None:
    assert top_node(_report()) == "hgx-174"
    assert top_node({"nodes": []}) is None
    assert top_node({"nodes": ["x"]}) is None
    assert top_node({}) is None


def test_the_culprits_missing_module_decides_the_category(kb: Path) -> None:
    """Read as the culprit's, the victim's teardown made the job a node failure
    (hardware); the culprit's own ModuleNotFoundError is what an SRE hands over."""
    report = attach_root_causes(_report(), kb=kb)
    assert report["categories"][0]["category"] == "user", report["categories"]
    cited = {e.get("event_id") for rc in report["root_causes"] for e in rc["evidence"]}
    assert "3" in cited, report["root_causes"]
