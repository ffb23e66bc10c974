"""The progress bar of a long diagnosis (``l4.progress``): on a terminal it shows files and
bytes parsed and the analysis steps on stderr; piped, or with ``--format json``, the output
is exactly what it was."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from prefect_fixtures import make_job
from typer.testing import CliRunner

from l4.cli import app
from l4.progress import reporter, showing, wanted

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _jobs(tmp_path: Path) -> tuple[Path, Path]:
    job = make_job(tmp_path / "job", nodes=4, iterations=40, culprit=2)
    base = make_job(tmp_path / "base", nodes=4, iterations=40, failed=False)
    return job, base


def _args(job: Path, base: Path, *extra: str) -> list[str]:
    return ["diagnose", str(job), "-b", str(base), "--no-prefect", "--no-kb", *extra]


def test_a_forced_terminal_shows_files_bytes_and_steps(tmp_path, monkeypatch):
    job, base = _jobs(tmp_path)
    plain = runner.invoke(app, _args(job, base))
    assert plain.exit_code == 0 and plain.stderr == ""
    monkeypatch.setenv("L4_PROGRESS", "1")
    monkeypatch.setenv("L4_PROGRESS_DELAY", "0")
    res = runner.invoke(app, _args(job, base))
    assert res.exit_code == 0, res.output
    assert res.stdout == plain.stdout  # the report itself is the same
    err = res.stderr
    assert "8/8 files" in err and "analysing nodes and iterations" in err, err
    assert "\x1b[" in err  # drawn as a terminal bar


def test_json_output_never_shows_a_bar(tmp_path, monkeypatch):
    job, base = _jobs(tmp_path)
    monkeypatch.setenv("L4_PROGRESS", "1")
    monkeypatch.setenv("L4_PROGRESS_DELAY", "0")
    res = runner.invoke(app, _args(job, base, "--format", "json"))
    assert res.exit_code == 0 and res.stderr == ""
    assert json.loads(res.stdout)["nodes"][0]["node"] == "node-02"


def test_a_quick_run_stays_silent_until_the_delay(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_PROGRESS", "1")
    monkeypatch.setenv("L4_PROGRESS_DELAY", "60")
    buf = io.StringIO()
    with showing(True, buf) as rep:
        assert reporter() is rep
        rep.add_files(2, 100)
        rep.file_done(50)
        rep.step("analysing")
    assert buf.getvalue() == "" and type(reporter()).__name__ == "Reporter"


def test_piped_stderr_is_not_a_terminal(monkeypatch):
    monkeypatch.delenv("L4_PROGRESS", raising=False)
    assert not wanted(io.StringIO())
    monkeypatch.setenv("L4_PROGRESS", "0")
    _, slave = pty.openpty()
    with os.fdopen(slave, "w") as tty:
        assert not wanted(tty)
        monkeypatch.delenv("L4_PROGRESS")
        assert wanted(tty)


def test_a_real_terminal_gets_the_bar_and_a_pipe_does_not(tmp_path):
    """The real command in a pseudo-terminal (stderr a tty) against the same command piped."""
    job, base = _jobs(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO), "L4_PROGRESS_DELAY": "0"}
    env.pop("L4_PROGRESS", None)
    cmd = [sys.executable, "-m", "l4.cli", *_args(job, base)]
    piped = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and piped.stderr == ""
    master, slave = pty.openpty()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=slave, text=True,
                          timeout=120)
    os.close(slave)
    seen = b""
    try:
        while chunk := os.read(master, 65536):
            seen += chunk
    except OSError:  # the pty is closed once the child is gone
        pass
    os.close(master)
    assert proc.returncode == 0 and proc.stdout == piped.stdout
    assert b"files" in seen and b"\x1b[" in seen, seen[-500:]
