"""A durable knowledge base, with real processes and a real full file system: a full disk
or a kill -9 mid-write leaves the previous state readable; a damaged or foreign file gets
one line naming it and how to restore; ``l4 kb backup`` and ``l4 kb check``."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from l4 import kbstore
from l4.cli import app
from l4.kbstore import KBError

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@contextlib.contextmanager
def small_fs(where: Path, size: str = "4m"):
    """A tmpfs of ``size`` mounted at ``where``; skips the test where mounting is not allowed."""
    where.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a small file system here ({res.stderr.strip()[:80]})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(fs: Path) -> Path:
    filler = fs / "filler"
    with open(filler, "wb") as fh:
        with contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
    return filler


def test_backup_and_check(tmp_path):
    kb = tmp_path / "kb.duckdb"
    did = kbstore.record_diagnosis({"job_id": "j", "nodes": []}, kb=kb)
    res = runner.invoke(app, ["kb", "backup", str(tmp_path / "b" / "kb-backup.duckdb"),
                              "--kb", str(kb)])
    assert res.exit_code == 0 and "restore with: cp" in res.output, res.output
    backup = tmp_path / "b" / "kb-backup.duckdb"
    assert [d["id"] for d in kbstore.list_diagnoses(kb=backup)] == [did]
    assert not [p for p in backup.parent.iterdir() if p.name.endswith(".tmp")]
    res = runner.invoke(app, ["kb", "check", "--kb", str(backup)])
    assert res.exit_code == 0 and "ok" in res.output and "1 diagnoses" in res.output
    res = runner.invoke(app, ["kb", "backup", str(kb), "--kb", str(kb)])
    assert res.exit_code == 1 and "must not be the knowledge base itself" in res.output


def _foreign_files(tmp_path: Path, good: Path) -> dict[str, Path]:
    data = good.read_bytes()
    files = {}
    files["truncated"] = tmp_path / "truncated.duckdb"
    files["truncated"].write_bytes(data[: len(data) // 2])
    files["random"] = tmp_path / "random.duckdb"
    files["random"].write_bytes(os.urandom(200_000))
    files["text"] = tmp_path / "notes.duckdb"
    files["text"].write_text("my notes\n")
    files["sqlite"] = tmp_path / "sqlite.duckdb"
    con = sqlite3.connect(files["sqlite"])
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()
    import duckdb

    files["other-duckdb"] = tmp_path / "other.duckdb"
    con = duckdb.connect(str(files["other-duckdb"]))
    con.execute("CREATE TABLE sales (id INTEGER)")
    con.close()
    return files


@pytest.mark.parametrize("command", [["inbox"], ["kb", "check"], ["kb", "list"],
                                     ["kb", "backup", "BACKUP"]])
def test_damaged_or_foreign_files_get_one_line_and_stay_untouched(tmp_path, command):
    good = tmp_path / "good.duckdb"
    kbstore.record_diagnosis({"job_id": "j"}, kb=good)
    for name, path in _foreign_files(tmp_path, good).items():
        before = _digest(path)
        args = [str(tmp_path / f"{name}.bak") if a == "BACKUP" else a for a in command]
        res = runner.invoke(app, [*args, "--kb", str(path)])
        assert res.exit_code == 1, (name, res.output)
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), (name, res.output)
        assert str(path) in lines[0] and ("restore" in lines[0] or "move" in lines[0]), lines[0]
        assert "Traceback" not in res.output
        assert _digest(path) == before, f"{name} was modified"
        assert not (tmp_path / f"{name}.bak").exists()


def test_full_disk_leaves_the_previous_state_readable(tmp_path):
    with small_fs(tmp_path / "fs") as fs:
        kb = fs / "kb.duckdb"
        first = kbstore.record_diagnosis({"job_id": "before", "nodes": []}, kb=kb)
        filler = _fill(fs)
        with pytest.raises(KBError, match="disk is full") as err:
            kbstore.record_diagnosis({"job_id": "big", "pad": os.urandom(600_000).hex()}, kb=kb)
        assert str(kb) in str(err.value)
        assert [d["id"] for d in kbstore.list_diagnoses(kb=kb)] == [first]  # still readable
        # a diagnosis on the full disk still prints its report, with a warning
        from prefect_fixtures import make_job

        job = make_job(tmp_path / "job", nodes=3, iterations=20)
        res = runner.invoke(app, ["diagnose", str(job), "--no-prefect", "--kb", str(kb),
                                  "--format", "json"])
        assert res.exit_code == 0 and "diagnosis not recorded" in res.stdout, res.output
        # a backup onto the full disk fails cleanly and leaves nothing behind
        res = runner.invoke(app, ["kb", "backup", str(fs / "kb.bak"), "--kb", str(kb)])
        assert res.exit_code == 1 and "nothing was replaced" in res.output, res.output
        assert not [p for p in fs.iterdir() if p.name.startswith(".kb.bak")]
        filler.unlink()
        second = kbstore.record_diagnosis({"job_id": "after", "nodes": []}, kb=kb)
        assert {d["id"] for d in kbstore.list_diagnoses(kb=kb)} == {first, second}
        assert kbstore.check_kb(kb=kb)["ok"]


WRITER = """
import os, sys
from l4 import kbstore
kb = sys.argv[1]
n = 0
while True:
    print("begin", flush=True)
    did = kbstore.record_diagnosis({"job_id": f"w{n}", "pad": os.urandom(200_000).hex()}, kb=kb)
    print(did, flush=True)
    n += 1
"""


def test_kill_9_mid_write_leaves_the_previous_state(tmp_path):
    """A writer committing 400 KB reports in a loop is killed with SIGKILL at points spread
    over one ``record_diagnosis`` call (its duration measured on the writer's first calls):
    every committed diagnosis survives, nothing half-written appears, check passes."""
    kb = tmp_path / "kb.duckdb"
    kbstore.list_patterns(kb=kb)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    committed: list[str] = []
    rounds = 8
    for round_ in range(rounds):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(kb)], stdout=subprocess.PIPE,
                                env=env, text=True)
        took: list[float] = []
        begun = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline().strip()
            if not line:
                break
            if line != "begin":
                committed.append(line)
                took.append(time.monotonic() - begun)
            elif len(took) >= 2:  # a third write has begun: kill it part-way
                time.sleep(min(took) * round_ / rounds)
                break
            begun = time.monotonic()
        assert len(took) >= 2, "the writer never committed"
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        committed += [ln.strip() for ln in out.splitlines() if ln.strip() not in ("", "begin")]
        check = kbstore.check_kb(kb=kb)
        assert check["ok"], check["problems"]
        stored = kbstore.list_diagnoses(kb=kb)
        ids = {d["id"] for d in stored}
        assert set(committed) <= ids  # every committed write survived
        assert len(ids) <= len(committed) + round_ + 1  # at most the one in flight each time
        assert all(len(d["report"]["pad"]) == 400_000 for d in stored if "pad" in d["report"])
    print(f"\n[kill -9: {rounds} writers killed mid-write, {len(committed)} writes committed, "
          f"{len(set(committed) - ids)} lost, {len(ids)} stored, check ok]")
