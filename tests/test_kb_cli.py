"""The SRE loop through the typer CLI (inbox, show, confirm, reject, kb ...)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from l4 import kbstore
from l4.cli_kb import register

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    a = typer.Typer()

    @a.callback()
    def main() -> None:
        """l4 (test app)"""

    register(a)
    return a


def run(app: typer.Typer, kb: Path, *args: str):
    return runner.invoke(app, [*args, "--kb", str(kb)], catch_exceptions=False)


def _report(text: str, job: str = "job-9") -> dict:
    return {"job_id": job, "stage": "checkpointing", "nodes": [{"node": "w1", "score": 1.0}],
            "events": [{"event_id": "e1", "template": text, "score": 2.0, "count": 1, "nodes": ["w1"],
                        "examples": [{"file": "logs/w1.log", "line": 3, "node": "w1", "text": text}]}],
            "root_causes": []}


def test_kb_list_show_search(app: typer.Typer, kb: Path) -> None:
    r = run(app, kb, "kb", "list", "--format", "json")
    assert r.exit_code == 0
    assert len(json.loads(r.stdout)) >= 40
    r = run(app, kb, "kb", "show", "gpu-xid79-fallen-off-bus")
    assert r.exit_code == 0 and "fallen off the bus" in r.stdout and "action:" in r.stdout
    r = run(app, kb, "kb", "search", "No space left on device when saving the model", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["pattern_id"] == "checkpoint-disk-full"


def test_kb_match_file(app: typer.Typer, kb: Path, tmp_path: Path) -> None:
    f = tmp_path / "excerpt.log"
    f.write_text("[rank3]: EI0006: [PID: 1] Getting socket times out. Reason: Remote Rank did not send the data in time\n")
    r = run(app, kb, "kb", "match", str(f), "--format", "json")
    assert r.exit_code == 0
    out = json.loads(r.stdout)
    assert out["root_causes"][0]["pattern_id"] == "hccl-ei0006-socket-timeout"
    f.write_text("all good, step 10 loss 1.23\n")
    r = run(app, kb, "kb", "match", str(f), "--format", "json")
    out = json.loads(r.stdout)
    assert out["root_causes"] == []
    assert sorted(c["category"] for c in out["categories"]) == ["framework", "hardware", "platform", "user"]
    r = run(app, kb, "kb", "match", str(f))
    assert "no known pattern" in r.stdout and "category: " in r.stdout
    r = run(app, kb, "kb", "match", str(tmp_path / "missing.log"))
    assert r.exit_code == 1 and "no such file" in r.stderr


def test_inbox_show_confirm_reject(app: typer.Typer, kb: Path) -> None:
    assert "inbox empty" in run(app, kb, "inbox").stdout
    d1 = kbstore.record_diagnosis(_report("OSError: [Errno 28] No space left on device"), kb=kb)
    d2 = kbstore.record_diagnosis(_report("something odd", job="job-10"), kb=kb)
    r = run(app, kb, "inbox", "--format", "json")
    assert [d["id"] for d in json.loads(r.stdout)] == [d2, d1]
    r = run(app, kb, "inbox")
    assert d1 in r.stdout and d2 in r.stdout
    r = run(app, kb, "show", d1)
    assert r.exit_code == 0 and "job-9" in r.stdout and "pending" in r.stdout

    r = run(app, kb, "confirm", d1, "--pattern", "checkpoint-disk-full", "--by", "alice", "--no-embed")
    assert r.exit_code == 0 and f"confirmed {d1} as checkpoint-disk-full" in r.stdout
    r = run(app, kb, "reject", d2, "--reason", "test job", "--by", "bob")
    assert r.exit_code == 0
    assert "inbox empty" in run(app, kb, "inbox").stdout
    r = run(app, kb, "inbox", "--all", "--format", "json")
    assert {d["status"] for d in json.loads(r.stdout)} == {"confirmed", "rejected"}
    r = run(app, kb, "show", d1, "--format", "json")
    assert json.loads(r.stdout)["decided_by"] == "alice"


def test_confirm_new_pattern_from_cli(app: typer.Typer, kb: Path) -> None:
    did = kbstore.record_diagnosis(_report("trn-4: FabricGuard: lane 7 parity storm, draining"), kb=kb)
    r = run(app, kb, "confirm", did, "--new", "--title", "Fabric parity storm",
            "--category", "hardware", "--action", "Replace the fabric card")
    assert r.exit_code == 0, r.stdout + r.stderr
    p = kbstore.get_pattern("fabric-parity-storm", kb=kb)
    assert p["category"] == "hardware" and p["times_confirmed"] == 1
    assert kbstore.stale_embeddings(kb=kb) == []  # re-embedded right away
    r = run(app, kb, "kb", "search", "trn-9: FabricGuard: lane 2 parity storm, draining", "--format", "json")
    assert json.loads(r.stdout)[0]["pattern_id"] == "fabric-parity-storm"


def test_bad_input_is_one_clear_line(app: typer.Typer, kb: Path, tmp_path: Path) -> None:
    did = kbstore.record_diagnosis(_report("x failed"), kb=kb)
    cases = [
        (("confirm", "nope", "--pattern", "x"), "no diagnosis"),
        (("confirm", did), "either --pattern"),
        (("confirm", did, "--new", "--title", "t"), "--new needs"),
        (("confirm", did, "--pattern", "no-such", "--no-embed"), "no pattern"),
        (("reject", did, "--reason", " "), "reason"),
        (("kb", "show", "no-such"), "no pattern"),
        (("kb", "edit", "slurm-preemption"), "nothing to change"),
    ]
    for args, msg in cases:
        r = run(app, kb, *args)
        assert r.exit_code == 1, args
        assert msg in r.stderr and "Traceback" not in r.stderr + r.stdout, (args, r.stderr)
    bad = tmp_path / "notakb.duckdb"
    bad.write_text("hello")
    r = runner.invoke(app, ["inbox", "--kb", str(bad)])
    assert r.exit_code == 1 and "not an l4 knowledge base" in r.stderr
    assert bad.read_text() == "hello"


def test_add_edit_export_import(app: typer.Typer, kb: Path, tmp_path: Path) -> None:
    r = run(app, kb, "kb", "add", "--id", "thermal-throttle", "--title", "GPU thermal throttling",
            "--category", "hardware", "--action", "Check cooling", "--indicator",
            "clocks_throttle_reasons.hw_thermal_slowdown: Active", "--code", "XID62", "--no-embed")
    assert r.exit_code == 0, r.stderr
    r = run(app, kb, "kb", "add", "--id", "thermal-throttle", "--title", "x", "--category", "user",
            "--action", "y", "--no-embed")
    assert r.exit_code == 1 and "already exist" in r.stderr
    r = run(app, kb, "kb", "edit", "thermal-throttle", "--add-indicator", "GPU 3 is throttled: HW Slowdown",
            "--action", "Check fans and inlet temperature", "--no-embed")
    assert r.exit_code == 0, r.stderr
    p = kbstore.get_pattern("thermal-throttle", kb=kb)
    assert len(p["indicators"]) == 2 and p["action"].startswith("Check fans")

    pat_file = tmp_path / "more.yaml"
    pat_file.write_text("patterns:\n  - {id: ok-one, title: One, category: user, indicators: [a b c]}\n"
                        "  - {id: BAD, title: Two, category: user}\n")
    r = run(app, kb, "kb", "add", "--file", str(pat_file), "--no-embed")
    assert r.exit_code == 1 and kbstore.get_pattern("ok-one", kb=kb) is None  # all or nothing

    out = tmp_path / "export.json"
    assert run(app, kb, "kb", "export", "-o", str(out)).exit_code == 0
    other = tmp_path / "other.duckdb"
    r = run(app, other, "kb", "import", str(out), "--replace")
    assert r.exit_code == 0, r.stderr
    assert kbstore.export_kb(kb=other) == json.loads(out.read_text())
    (tmp_path / "junk.json").write_text("{not json")
    r = run(app, other, "kb", "import", str(tmp_path / "junk.json"))
    assert r.exit_code == 1 and "not valid JSON" in r.stderr
