"""The knowledge-base store: creation, safety of writes, the SRE loop data, pools, export."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from l4 import kbstore
from l4.kbstore import KBError

ROOT = Path(__file__).resolve().parents[1]


def _report(job: str = "job-1", text: str = "worker-3: fatal thing happened code 17") -> dict:
    return {
        "job_id": job, "config_id": "cfg-a", "stage": "training",
        "nodes": [{"node": "worker-3", "score": 0.9}],
        "events": [{"event_id": "e1", "template": "fatal thing happened code <*>", "score": 3.0,
                    "count": 2, "nodes": ["worker-3"],
                    "examples": [{"file": "logs/worker-3.log", "line": 10, "node": "worker-3", "text": text}]}],
        "root_causes": [],
    }


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    return tmp_path / "kb" / "kb.duckdb"


def _run(code: str, kb: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
        timeout=timeout, env={**os.environ, "L4_KB": str(kb), **env},
    )


# --- creation, migration, refusal to touch foreign files --------------------------------------


def test_fresh_kb_is_created_migrated_and_seeded(kb: Path) -> None:
    pats = kbstore.list_patterns(kb=kb)
    assert kb.is_file()
    assert len(pats) >= 40
    assert {p["category"] for p in pats} == set(kbstore.CATEGORIES)
    assert all(p["origin"] == "seed" and p["times_confirmed"] == 0 for p in pats)
    with kbstore.connect(kb) as con:
        version = con.execute("SELECT value FROM kb_meta WHERE key = 'schema_version'").fetchone()[0]
    assert int(version) == kbstore.SCHEMA_VERSION


def test_seed_library_is_reviewed_quality() -> None:
    pats = kbstore.seed_patterns()
    ids = [p["id"] for p in pats]
    assert len(ids) == len(set(ids)) >= 40
    for p in pats:
        assert p["sources"], p["id"]
        assert len(p["indicators"]) >= 2, p["id"]
        assert p["action"] and p["description"], p["id"]
    codes = {c for p in pats for c in p["codes"]}
    for needed in ["XID48", "XID63", "XID64", "XID74", "XID79", "XID94", "XID95", "EI0002",
                   "EI0006", "ERR02200", "ENOSPC", "EIO", "ESTALE", "EDQUOT", "SIGKILL",
                   "CUDA_OOM", "NPU_OOM", "SLURM_PREEMPTED", "SLURM_NODE_FAIL", "OOM_KILL"]:
        assert needed in codes, needed


def test_default_path_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("L4_KB", str(tmp_path / "x.duckdb"))
    assert kbstore.default_kb_path() == tmp_path / "x.duckdb"
    monkeypatch.delenv("L4_KB")
    p = kbstore.default_kb_path()
    assert p.name == "kb.duckdb" and p.parent.name == "l4"


def test_non_duckdb_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    bad = tmp_path / "kb.duckdb"
    bad.write_bytes(b"this is my precious text file\n" * 100)
    before = bad.read_bytes()
    with pytest.raises(KBError, match="not an l4 knowledge base"):
        kbstore.list_patterns(kb=bad)
    assert bad.read_bytes() == before


def test_foreign_duckdb_file_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE sales (x INT)")
    con.close()
    with pytest.raises(KBError, match="not an l4 knowledge base"):
        kbstore.record_diagnosis(_report(), kb=other)
    con = duckdb.connect(str(other))
    assert {r[0] for r in con.execute("SHOW TABLES").fetchall()} == {"sales"}
    con.close()


def test_newer_schema_is_refused(kb: Path) -> None:
    kbstore.list_patterns(kb=kb)
    con = duckdb.connect(str(kb))
    con.execute("UPDATE kb_meta SET value = '999' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(KBError, match="newer"):
        kbstore.list_patterns(kb=kb)


def test_directory_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KBError, match="directory"):
        kbstore.list_patterns(kb=tmp_path)


# --- diagnoses and the SRE loop -----------------------------------------------------------------


def test_diagnoses_are_listed_newest_first_and_found_by_prefix(kb: Path) -> None:
    ids = [kbstore.record_diagnosis(_report(job=f"job-{i}"), kb=kb) for i in range(3)]
    listed = kbstore.list_diagnoses(kb=kb)
    assert [d["id"] for d in listed] == ids[::-1]
    assert all(d["status"] == "pending" for d in listed)
    d = kbstore.get_diagnosis(ids[1][:8], kb=kb)
    assert d is not None and d["id"] == ids[1] and d["report"]["job_id"] == "job-1"
    assert kbstore.get_diagnosis("nope", kb=kb) is None
    with pytest.raises(KBError):
        kbstore.list_diagnoses("bogus", kb=kb)


def test_confirm_existing_pattern_learns_the_events(kb: Path) -> None:
    did = kbstore.record_diagnosis(_report(text="worker-3: brand new failure text 42"), kb=kb)
    before = kbstore.get_pattern("storage-io-error", kb=kb)
    pid = kbstore.confirm_diagnosis(did, pattern_id="storage-io-error", by="alice", kb=kb)
    after = kbstore.get_pattern("storage-io-error", kb=kb)
    assert pid == "storage-io-error"
    assert after["times_confirmed"] == before["times_confirmed"] + 1
    assert after["indicators"] == before["indicators"] + ["worker-3: brand new failure text 42"]
    d = kbstore.get_diagnosis(did, kb=kb)
    assert (d["status"], d["pattern_id"], d["decided_by"]) == ("confirmed", pid, "alice")
    assert kbstore.list_diagnoses("pending", kb=kb) == []


def test_confirm_new_pattern(kb: Path) -> None:
    did = kbstore.record_diagnosis(_report(), kb=kb)
    pid = kbstore.confirm_diagnosis(
        did, new_pattern={"title": "Fatal thing", "category": "user", "action": "fix it"}, kb=kb)
    p = kbstore.get_pattern(pid, kb=kb)
    assert pid == "fatal-thing" and p["origin"] == "sre" and p["times_confirmed"] == 1
    assert p["indicators"] == ["worker-3: fatal thing happened code 17"]
    # the same title again gets a distinct id
    did2 = kbstore.record_diagnosis(_report(), kb=kb)
    assert kbstore.confirm_diagnosis(
        did2, new_pattern={"title": "Fatal thing", "category": "user", "action": "x"}, kb=kb) == "fatal-thing-2"


def test_failed_confirm_changes_nothing(kb: Path) -> None:
    did = kbstore.record_diagnosis(_report(), kb=kb)
    with pytest.raises(KBError, match="no pattern"):
        kbstore.confirm_diagnosis(did, pattern_id="no-such-pattern", kb=kb)
    with pytest.raises(KBError, match="category"):
        kbstore.confirm_diagnosis(did, new_pattern={"title": "t", "category": "cosmic", "action": "a"}, kb=kb)
    with pytest.raises(KBError):
        kbstore.confirm_diagnosis(did, kb=kb)
    assert kbstore.get_diagnosis(did, kb=kb)["status"] == "pending"


def test_reject_needs_a_reason(kb: Path) -> None:
    did = kbstore.record_diagnosis(_report(), kb=kb)
    with pytest.raises(KBError, match="reason"):
        kbstore.reject_diagnosis(did, reason="  ", kb=kb)
    kbstore.reject_diagnosis(did, reason="job was cancelled by me", by="bob", kb=kb)
    d = kbstore.get_diagnosis(did, kb=kb)
    assert (d["status"], d["reason"], d["decided_by"]) == ("rejected", "job was cancelled by me", "bob")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.dictionaries(st.text(min_size=1, max_size=8),
                             st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                                          lambda c: st.lists(c, max_size=3), max_leaves=8),
                             max_size=4))
def test_reports_round_trip_exactly(tmp_path: Path, extra: dict) -> None:
    kb = tmp_path / "rt.duckdb"
    report = {**_report(), "extra": extra}
    did = kbstore.record_diagnosis(report, kb=kb)
    assert kbstore.get_diagnosis(did, kb=kb)["report"] == json.loads(json.dumps(report))


# --- atomicity -----------------------------------------------------------------------------------


def test_exception_inside_a_transaction_keeps_the_previous_state(kb: Path) -> None:
    did = kbstore.record_diagnosis(_report(), kb=kb)
    before = kbstore.export_kb(kb=kb)
    with pytest.raises(RuntimeError):
        with kbstore.transaction(kb) as con:
            con.execute("UPDATE diagnoses SET status = 'rejected' WHERE id = ?", [did])
            con.execute("DELETE FROM patterns")
            raise RuntimeError("crash in the middle")
    assert kbstore.export_kb(kb=kb) == before


def test_killed_writer_leaves_the_previous_state(kb: Path) -> None:
    kbstore.record_diagnosis(_report(), kb=kb)
    before = kbstore.export_kb(kb=kb)
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, time
            from l4 import kbstore
            with kbstore.transaction() as con:
                con.execute("DELETE FROM patterns")
                for i in range(2000):
                    con.execute("INSERT INTO diagnoses (id, created_at, report) VALUES (?, now(), '{}')", [f"x{i}"])
                print("inside", flush=True)
                time.sleep(60)
        """)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "L4_KB": str(kb)},
    )
    assert proc.stdout.readline().strip() == "inside"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert kbstore.export_kb(kb=kb) == before


def test_invalid_import_changes_nothing(kb: Path) -> None:
    before = kbstore.export_kb(kb=kb)
    bad = {**before, "patterns": before["patterns"] + [{"id": "Bad Id!", "title": "x", "category": "user"}]}
    with pytest.raises(KBError, match="invalid pattern id"):
        kbstore.import_kb(bad, kb=kb, replace=True)
    with pytest.raises(KBError, match="not an l4"):
        kbstore.import_kb({"patterns": []}, kb=kb)
    assert kbstore.export_kb(kb=kb) == before


# --- concurrency with real processes ------------------------------------------------------------


def test_flow_and_sre_write_concurrently(kb: Path) -> None:
    """A flow recording diagnoses while an SRE confirms others: both finish, nothing lost."""
    pending = [kbstore.record_diagnosis(_report(job=f"old-{i}"), kb=kb) for i in range(15)]
    flow = """
        from l4 import kbstore
        for i in range(25):
            kbstore.record_diagnosis({"job_id": f"new-{i}", "events": [], "root_causes": []})
        print("flow done")
    """
    sre = f"""
        from l4 import kbstore
        for i, did in enumerate({pending!r}):
            if i % 2:
                kbstore.confirm_diagnosis(did, pattern_id="storage-io-error", by="sre")
            else:
                kbstore.reject_diagnosis(did, reason="not a fault", by="sre")
            kbstore.list_diagnoses("pending")
        print("sre done")
    """
    env = {**os.environ, "L4_KB": str(kb)}
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for code in (flow, sre)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    assert outs[0][0].strip() == "flow done" and outs[1][0].strip() == "sre done"
    diags = kbstore.list_diagnoses(kb=kb)
    assert len(diags) == 40
    assert sum(d["status"] == "confirmed" for d in diags) == 7
    assert sum(d["status"] == "rejected" for d in diags) == 8
    assert kbstore.get_pattern("storage-io-error", kb=kb)["times_confirmed"] == 7


def test_lock_held_too_long_is_a_clear_error(kb: Path) -> None:
    kbstore.list_patterns(kb=kb)
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(kb)!r}); print('held', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        r = _run("""
            from l4 import kbstore
            try:
                kbstore.list_patterns()
            except kbstore.KBError as e:
                print("KBError:", e)
        """, kb, L4_KB_LOCK_TIMEOUT="0.5")
        assert "KBError:" in r.stdout and "locked by another process" in r.stdout, r.stderr
    finally:
        holder.kill()
        holder.wait()
    t0 = time.monotonic()
    assert kbstore.list_patterns(kb=kb)  # usable again once released
    assert time.monotonic() - t0 < 30


# --- normal pools --------------------------------------------------------------------------------


def _row(t: str, n: int = 1) -> dict:
    return {"template": t, "total_count": n, "n_nodes_with": 1, "n_nodes": 4, "max_per_node": n,
            "lines_total": 100}


def test_normal_pool_add_replace_and_isolation(kb: Path) -> None:
    kbstore.add_normal_job("cfg-a", "j1", [_row("a <*>"), _row("b", 3)], kb=kb)
    kbstore.add_normal_job("cfg-a", "j2", [_row("a <*>", 2)], kb=kb)
    kbstore.add_normal_job("cfg-b", "j9", [_row("z")], kb=kb)
    rows = kbstore.load_normal_rows("cfg-a", kb=kb)
    assert len(rows) == 3 and {r["job_id"] for r in rows} == {"j1", "j2"}
    assert {k for r in rows for k in r} == {"job_id", "template", "total_count", "n_nodes_with",
                                            "n_nodes", "max_per_node", "lines_total",
                                            # where the event sits in a healthy run (l4.phases)
                                            "phase", "place", "stage", "named", "share",
                                            "counter", "first_count",
                                            "pace_first", "pace_step", "pace_anchor"}
    assert all(r["phase"] is None for r in rows)  # rows that carry no timeline
    kbstore.add_normal_job("cfg-a", "j1", [_row("c")], kb=kb)  # re-adding replaces
    assert sorted(r["template"] for r in kbstore.load_normal_rows("cfg-a", kb=kb)) == ["a <*>", "c"]
    assert kbstore.load_normal_rows("nope", kb=kb) == []
    with pytest.raises(KBError, match="normal-pool row"):
        kbstore.add_normal_job("cfg-a", "j3", [{"template": "x"}], kb=kb)
    assert len(kbstore.load_normal_rows("cfg-a", kb=kb)) == 2


# --- export / import, edits, seed updates ------------------------------------------------------


def test_export_import_round_trip_is_lossless(tmp_path: Path) -> None:
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    d1 = kbstore.record_diagnosis(_report(job="j-1"), kb=a)
    d2 = kbstore.record_diagnosis(_report(job="j-2"), kb=a)
    kbstore.record_diagnosis(_report(job="j-3"), kb=a)
    kbstore.confirm_diagnosis(d1, pattern_id="checkpoint-disk-full", by="alice", kb=a)
    kbstore.reject_diagnosis(d2, reason="noise", kb=a)
    kbstore.update_pattern("slurm-preemption", {"action": "requeue it"}, kb=a)
    kbstore.add_pattern({"id": "my-fault", "title": "Mine", "category": "user",
                         "indicators": ["boom <*>"], "codes": ["EIO"]}, kb=a)
    kbstore.add_normal_job("cfg-a", "ok-1", [_row("a"), _row("b", 5)], kb=a)
    exported = kbstore.export_kb(kb=a)
    kbstore.record_diagnosis(_report(job="other"), kb=b)
    kbstore.import_kb(json.loads(json.dumps(exported)), kb=b, replace=True)
    assert kbstore.export_kb(kb=b) == exported
    # merging into a KB with other content keeps that content
    c = tmp_path / "c.duckdb"
    extra = kbstore.record_diagnosis(_report(job="c-only"), kb=c)
    kbstore.import_kb(exported, kb=c)
    assert kbstore.get_diagnosis(extra, kb=c) is not None
    assert kbstore.get_pattern("my-fault", kb=c)["codes"] == ["EIO"]


def test_update_pattern_validates_and_survives_seed_refresh(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KBError, match="category"):
        kbstore.update_pattern("slurm-preemption", {"category": "weather"}, kb=kb)
    with pytest.raises(KBError, match="cannot edit"):
        kbstore.update_pattern("slurm-preemption", {"times_confirmed": 9}, kb=kb)
    kbstore.update_pattern("slurm-preemption", {"title": "Edited by SRE"}, kb=kb)
    # a newer seed library: untouched seed patterns follow it, locally edited ones do not
    seed_hash, pats = kbstore._seed()
    changed = [p | {"title": p["title"] + " (v2)"} for p in pats]
    monkeypatch.setattr(kbstore, "_seed_cache", (seed_hash + "-v2", changed))
    assert kbstore.get_pattern("slurm-preemption", kb=kb)["title"] == "Edited by SRE"
    assert kbstore.get_pattern("slurm-node-failure", kb=kb)["title"].endswith("(v2)")


@given(pid=st.text(max_size=30))
def test_invalid_pattern_ids_are_rejected(pid: str) -> None:
    import re

    p = {"id": pid, "title": "t", "category": "user"}
    # surrounding whitespace is not part of an id (validate_pattern strips it, as YAML
    # and the CLI may leave it); what remains must be a slug
    if re.fullmatch(r"[a-z0-9][a-z0-9._-]{1,79}", pid.strip()):
        assert kbstore.validate_pattern(p)["id"] == pid.strip()
    else:
        with pytest.raises(KBError):
            kbstore.validate_pattern(p)
