"""The local Prefect server ``l4 diagnose`` starts once and reuses (``flows.localserver``):
real server processes in a tmp data dir, the commands through typer's CliRunner, a real
``l4 diagnose`` process on a job with a known culprit.  Always stopped at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prefect_fixtures import make_job
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()

pytestmark = pytest.mark.prefect


def _cli():
    from l4.cli import app

    return app


@pytest.fixture
def server_dir(tmp_path, monkeypatch):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    d = tmp_path / "data" / "prefect-server"
    monkeypatch.setenv("L4_SERVER_DIR", str(d))
    monkeypatch.setenv("L4_LOCAL_SERVER", "1")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        try:
            yield d
        finally:
            from flows.localserver import stop

            stop(d)


def _diagnose(job: Path, base: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    """``l4 diagnose`` as a user runs it: its own process, no PREFECT_API_URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PYTHONPATH=str(REPO), PREFECT_HOME=str(tmp / "client-home"),
               PREFECT_SERVER_ANALYTICS_ENABLED="false")
    return subprocess.run(
        [sys.executable, "-m", "l4.cli", "diagnose", str(job), "-b", str(base), "--no-kb",
         "-f", "json", "--force", *extra],
        env=env, capture_output=True, text=True, timeout=240,
    )


def _ended(pid: int, timeout: float = 15.0) -> bool:
    """Whether ``pid`` ended; reaps it when it is this process's child (the warm process
    that ``l4 server start`` started in-process here), which stays a zombie otherwise."""
    import time

    from flows.localserver import _pid_alive

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:  # not our child: the kernel's answer is enough
            if not _pid_alive(pid):
                return True
        time.sleep(0.1)
    return False


def test_server_commands_and_diagnose_reuse_one_server(tmp_path, server_dir):
    from flows.localserver import _pid_alive

    res = runner.invoke(_cli(), ["server", "status"])
    assert res.exit_code == 1 and "not running" in res.output

    res = runner.invoke(_cli(), ["server", "start"])
    assert res.exit_code == 0 and res.output.startswith("started: http://127.0.0.1:"), res.output
    url = (server_dir / "url").read_text()
    pid = int((server_dir / "pid").read_text())
    assert url.endswith("/api") and _pid_alive(pid) and (server_dir / "prefect.db").exists()
    # the warm diagnosis process comes up with it, so the first diagnose is a warm one
    assert "warm diagnosis process: pid" in res.output, res.output
    warm_pid = int((server_dir / "warm" / "pid").read_text())
    assert _pid_alive(warm_pid)

    res = runner.invoke(_cli(), ["server", "start"])
    assert res.exit_code == 0 and "already running" in res.output and url[:-4] in res.output
    res = runner.invoke(_cli(), ["server", "status"])
    assert res.exit_code == 0 and f"running: {url[:-4]}" in res.output
    assert f"warm diagnosis process: pid {warm_pid}" in res.output

    job = make_job(tmp_path / "job", nodes=4, iterations=40, culprit=2)
    base = make_job(tmp_path / "base", nodes=4, iterations=40, failed=False)
    # a process pool as well: its workers must use the same server, not a temporary each
    os.environ["L4_TASK_RUNNER"] = "process"
    try:
        out = _diagnose(job, base, tmp_path, "--workers", "2")
    finally:
        del os.environ["L4_TASK_RUNNER"]
    assert out.returncode == 0, out.stderr[-2000:]
    rep = json.loads(out.stdout)
    assert rep["nodes"][0]["node"] == "node-02"
    assert rep["timing"]["prefect_server"] == "local"
    assert "temporary server" not in out.stderr and "started a local" not in out.stderr
    assert (server_dir / "url").read_text() == url  # reused, not restarted

    res = runner.invoke(_cli(), ["server", "stop"])
    assert res.exit_code == 0 and "stopped the server" in res.output
    assert not _pid_alive(pid) and not (server_dir / "url").exists()
    assert _ended(warm_pid)
    res = runner.invoke(_cli(), ["server", "status"])
    assert res.exit_code == 1


def test_diagnose_starts_the_server_when_none_runs(tmp_path, server_dir):
    from flows.localserver import status

    job = make_job(tmp_path / "job", nodes=3, iterations=30, culprit=1)
    base = make_job(tmp_path / "base", nodes=3, iterations=30, failed=False)
    out = _diagnose(job, base, tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "started a local Prefect server" in out.stderr and "http://127.0.0.1:" in out.stderr
    assert json.loads(out.stdout)["nodes"][0]["node"] == "node-01"
    srv = status(server_dir)
    assert srv is not None  # still there for the next command
    out = _diagnose(job, base, tmp_path)
    assert out.returncode == 0 and "started a local" not in out.stderr
    assert status(server_dir).url == srv.url


def test_a_server_dir_that_cannot_be_made_is_a_one_line_error(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("L4_SERVER_DIR", str(tmp_path / "file" / "srv"))
    res = runner.invoke(_cli(), ["server", "start"])
    assert res.exit_code == 1 and "did not start" in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
    res = runner.invoke(_cli(), ["server", "stop"])
    assert res.exit_code == 1 and "Traceback" not in res.output and res.exception is not None
    assert isinstance(res.exception, SystemExit)
