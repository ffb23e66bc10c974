"""One failure, one diagnosis: the same failure delivered twice is stored once, ``--force``
or changed logs diagnose again, racing writers store one row, and an old knowledge base
is migrated without losing its diagnoses."""

from __future__ import annotations

import json
import multiprocessing as mp
import os

import duckdb
import pytest
from prefect_fixtures import make_job
from typer.testing import CliRunner

from l4 import kbstore
from l4.cli import app
from l4.ingest import failure_key, logs_fingerprint
from l4.pipeline import diagnose_and_record

runner = CliRunner()


def test_failure_key_names_the_job_or_the_directory_state(tmp_path):
    job = make_job(tmp_path / "run", nodes=2, iterations=3)
    assert failure_key(job, job_id="run", end_time="2024-05-01T10:00:00") == \
        "job:run@2024-05-01T10:00:00"
    key = failure_key(job)
    assert key.startswith(f"dir:{job.absolute()}@") and key == failure_key(job)
    fp = logs_fingerprint(job)
    os.utime(job / "logs" / "node-01.log", (2e9, 2e9))
    assert failure_key(job) == f"dir:{job.absolute()}@2000000000"
    assert logs_fingerprint(job) != fp


def test_the_same_failure_twice_is_one_diagnosis(tmp_path):
    job = make_job(tmp_path / "run", nodes=4, iterations=30)
    kb = tmp_path / "kb.duckdb"
    args = ["diagnose", str(job), "--no-prefect", "--kb", str(kb), "--format", "json"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    did = json.loads(first.stdout)["diagnosis_id"]
    again = runner.invoke(app, args)
    assert again.exit_code == 0
    assert "already diagnosed" in again.stderr and did in again.stderr
    assert json.loads(again.stdout)["diagnosis_id"] == did
    assert [d["id"] for d in kbstore.list_diagnoses(kb=kb)] == [did]

    forced = runner.invoke(app, [*args, "--force"])
    assert forced.exit_code == 0 and "already diagnosed" not in forced.stderr
    assert json.loads(forced.stdout)["diagnosis_id"] == did  # refreshed in place
    assert len(kbstore.list_diagnoses(kb=kb)) == 1

    inbox = runner.invoke(app, ["inbox", "--kb", str(kb)])
    assert inbox.exit_code == 0 and inbox.stdout.count(did) == 1


def test_changed_logs_are_diagnosed_again_once(tmp_path):
    """An event names the failure by job id and end time; logs that grew afterwards (a
    late collector) are diagnosed again, and the pending diagnosis is updated, not doubled."""
    job = make_job(tmp_path / "run", nodes=4, iterations=30)
    kb = tmp_path / "kb.duckdb"
    key = "job:run@2024-05-01T10:05:00"
    first = diagnose_and_record(job, [], kb=kb, failure_key=key)
    assert "already_diagnosed" not in first
    assert diagnose_and_record(job, [], kb=kb, failure_key=key)["already_diagnosed"]
    with open(job / "logs" / "node-02.log", "a") as fh:
        fh.write("2024-05-01 10:59:00.000 INFO rank 2: late line from the collector\n")
    third = diagnose_and_record(job, [], kb=kb, failure_key=key)
    assert "already_diagnosed" not in third and third["diagnosis_id"] == first["diagnosis_id"]
    [stored] = kbstore.list_diagnoses(kb=kb)
    assert stored["logs_fingerprint"] == logs_fingerprint(job)

    # once an SRE decided, the same logs keep that decision; changed logs get one new one
    kbstore.reject_diagnosis(stored["id"], reason="test", kb=kb)
    assert diagnose_and_record(job, [], kb=kb, failure_key=key)["already_diagnosed"]["status"] \
        == "rejected"
    with open(job / "logs" / "node-02.log", "a") as fh:
        fh.write("2024-05-01 11:00:00.000 INFO rank 2: another late line\n")
    diagnose_and_record(job, [], kb=kb, failure_key=key)
    assert [d["status"] for d in kbstore.list_diagnoses(kb=kb)] == ["pending", "rejected"]


def _record(kb: str, n: int, barrier) -> str:
    barrier.wait()
    rep = {"job_id": "storm", "failure_key": "job:storm@1", "logs_fingerprint": "1:2:3",
           "nodes": [], "events": [], "writer": n}
    return kbstore.record_diagnosis(rep, kb=kb)


def test_racing_writers_of_one_failure_store_one_row(tmp_path):
    kb = str(tmp_path / "kb.duckdb")
    kbstore.list_patterns(kb=kb)  # create and seed first
    ctx = mp.get_context("spawn")
    barrier = ctx.Manager().Barrier(4)
    with ctx.Pool(4) as pool:
        ids = pool.starmap(_record, [(kb, n, barrier) for n in range(4)])
    assert len(set(ids)) == 1
    assert len(kbstore.list_diagnoses(kb=kb)) == 1


def test_a_version_1_knowledge_base_is_migrated_keeping_its_diagnoses(tmp_path):
    kb = tmp_path / "kb.duckdb"
    did = kbstore.record_diagnosis({"job_id": "old", "nodes": []}, kb=kb)
    con = duckdb.connect(str(kb))  # make it what l4 before migration 2 wrote
    con.execute("ALTER TABLE diagnoses DROP COLUMN failure_key")
    con.execute("ALTER TABLE diagnoses DROP COLUMN logs_fingerprint")
    con.execute("UPDATE kb_meta SET value = '1' WHERE key = 'schema_version'")
    con.close()
    [d] = kbstore.list_diagnoses(kb=kb)
    assert d["id"] == did and d["failure_key"] is None
    con = duckdb.connect(str(kb), read_only=True)
    assert con.execute("SELECT value FROM kb_meta WHERE key = 'schema_version'").fetchone()[0] \
        == str(kbstore.SCHEMA_VERSION)
    con.close()


@pytest.mark.parametrize("fp", ["1:2:3", None])
def test_reports_without_a_key_are_stored_as_before(tmp_path, fp):
    kb = tmp_path / "kb.duckdb"
    rep = {"job_id": "j", "nodes": [], "logs_fingerprint": fp}
    assert kbstore.record_diagnosis(rep, kb=kb) != kbstore.record_diagnosis(rep, kb=kb)


def test_a_diagnosis_that_did_not_finish_is_in_the_inbox_until_one_does(tmp_path):
    """What a served run leaves when it keeps crashing or fails (flows.recovery), and how
    the next successful diagnosis of the same failure replaces it."""
    from flows.recovery import record_failure

    job = make_job(tmp_path / "run", nodes=3, iterations=20)
    kb = tmp_path / "kb.duckdb"
    params = {"job": str(job), "job_id": None, "failure_key": None, "kb": str(kb)}
    did = record_failure(params, "crashed (Process exited with status code: -9)", 3)
    res = runner.invoke(app, ["inbox", "--kb", str(kb)])
    assert res.exit_code == 0 and did in res.stdout and "diagnosis failed" in res.stdout
    rep = diagnose_and_record(job, [], kb=kb)  # the SRE (or a re-delivery) runs it again
    assert "already_diagnosed" not in rep and rep["diagnosis_id"] == did
    [d] = kbstore.list_diagnoses(kb=kb)
    assert d["report"]["nodes"] and "diagnosis_failed" not in d["report"]
