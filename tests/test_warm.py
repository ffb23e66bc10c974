"""The warm process behind ``l4 diagnose`` (``flows.warm``): real ``l4 diagnose`` processes,
a real local Prefect server and warm process in a tmp data dir, jobs with a known culprit.
The warm path must give the report the engine gives, as a real flow run on the server,
turn bad input into the same one-line error, be replaced when l4's code changes, and stop
with ``l4 server stop``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from prefect_fixtures import make_job
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _same(rep: dict) -> dict:
    """What a diagnosis says (timings and run ids differ between runs)."""
    return {"stage": rep["stage"], "nodes": rep["nodes"], "events": rep["events"],
            "iterations": rep["iterations"]}


@pytest.fixture
def server_dir(tmp_path, monkeypatch):
    # a short directory: the warm process's socket lives in it
    d = Path(tempfile.mkdtemp(prefix="l4w-", dir="/tmp")) / "prefect-server"
    monkeypatch.setenv("L4_SERVER_DIR", str(d))
    monkeypatch.setenv("L4_LOCAL_SERVER", "1")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    try:
        yield d
    finally:
        from flows.localserver import stop

        stop(d)
        shutil.rmtree(d.parent, ignore_errors=True)


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PYTHONPATH=str(REPO), PREFECT_HOME=str(tmp / "client-home"),
               PREFECT_SERVER_ANALYTICS_ENABLED="false",
               L4_TEMPLATES=str(tmp / "templates.drain3"), L4_KB=str(tmp / "kb.duckdb"))
    env.pop("L4_NO_PREFECT", None)
    env.update(extra)
    return env


def _diagnose(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "l4.cli", "diagnose", *args], env=env,
                          capture_output=True, text=True, timeout=300)


def _flow_runs(url: str) -> list:
    from prefect import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: url}), get_client(sync_client=True) as client:
        return client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=["diagnose-job"])))


@pytest.mark.prefect
def test_later_commands_run_the_flow_in_the_warm_process(tmp_path, server_dir):
    from flows.warm import _pid_alive, warm_dir

    job = make_job(tmp_path / "job", nodes=4, iterations=40, culprit=2)
    base = make_job(tmp_path / "base", nodes=4, iterations=40, failed=False)
    env = _env(tmp_path)
    args = [str(job), "-b", str(base), "--no-kb", "-f", "json", "--force"]

    first = _diagnose(env, *args)
    assert first.returncode == 0, first.stderr
    assert "started a local Prefect server" in first.stderr
    rep1 = json.loads(first.stdout)
    assert rep1["timing"]["warm_process"] is True and rep1["timing"]["prefect_server"] == "local"
    wd = warm_dir(server_dir)
    pid = int((wd / "pid").read_text())
    assert _pid_alive(pid)

    second = _diagnose(env, *args)
    assert second.returncode == 0, second.stderr
    rep2 = json.loads(second.stdout)
    assert rep2["timing"]["warm_process"] is True
    assert int((wd / "pid").read_text()) == pid  # the same process, not a new one
    assert rep2["nodes"][0]["node"] == "node-02"

    # a forced progress bar: the warm process's progress events drawn by the command
    shown = _diagnose(dict(env, L4_PROGRESS="1", L4_PROGRESS_DELAY="0"), str(job), "-b",
                      str(base), "--no-kb", "--force")
    assert shown.returncode == 0, shown.stderr
    assert "8/8 files" in shown.stderr and "\x1b[" in shown.stderr, shown.stderr[-500:]
    assert "node-02" in shown.stdout

    # the same report as the engine without Prefect, and as the flow in the command itself
    engine = _diagnose(env, *args, "--no-prefect")
    inproc = _diagnose(dict(env, L4_WARM="0"), *args)
    assert engine.returncode == 0 and inproc.returncode == 0, engine.stderr + inproc.stderr
    rep_inproc = json.loads(inproc.stdout)
    assert "warm_process" not in rep_inproc["timing"]
    assert _same(rep2) == _same(json.loads(engine.stdout)) == _same(rep_inproc)

    # real flow runs on the local server: three from the warm process, one from the command
    url = (server_dir / "url").read_text()
    runs = _flow_runs(url)
    assert len(runs) == 4 and all(r.state.is_completed() for r in runs)

    # bad input through the warm process: the same one-line error, no traceback
    bad = _diagnose(env, str(tmp_path / "missing"), "-f", "json")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines()[-1].startswith("error: job directory")
    assert bad.stdout == ""
    empty = tmp_path / "empty"
    (empty / "logs").mkdir(parents=True)
    bad = _diagnose(env, str(empty), "--no-kb")
    assert bad.returncode == 2 and "no node log files" in bad.stderr and "Traceback" not in bad.stderr
    assert _pid_alive(pid)  # bad input does not take the warm process down

    # l4 server stop stops the warm process too
    from l4.cli import app

    res = runner.invoke(app, ["server", "stop"])
    assert res.exit_code == 0, res.output
    assert not _pid_alive(pid) and not (wd / "pid").exists()


@pytest.mark.prefect
def test_a_warm_process_of_other_code_is_replaced_and_a_dead_one_is_not_waited_for(
        tmp_path, server_dir):
    from flows.warm import _pid_alive, warm_dir

    job = make_job(tmp_path / "job", nodes=3, iterations=30, culprit=1)
    env = _env(tmp_path)
    args = [str(job), "--no-kb", "-f", "json", "--force"]
    assert _diagnose(env, *args).returncode == 0
    wd = warm_dir(server_dir)
    pid = int((wd / "pid").read_text())

    (wd / "code").write_text("an-older-l4")  # what a process of another version left
    res = _diagnose(env, *args)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["timing"]["warm_process"] is True
    new = int((wd / "pid").read_text())
    assert new != pid and not _pid_alive(pid) and _pid_alive(new)

    # a warm process that cannot start: the command runs the flow itself, says so once
    os.kill(new, 9)
    res = _diagnose(dict(env, L4_WARM_START_TIMEOUT="0"), *args)
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert "warm_process" not in rep["timing"] and rep["nodes"][0]["node"] == "node-01"
    assert res.stderr.count("warm diagnosis process is unavailable") == 1


def test_which_diagnoses_go_to_the_warm_process(tmp_path, monkeypatch):
    from flows.warm import wanted

    job = make_job(tmp_path / "job", nodes=3, iterations=30)
    for k in ("PREFECT_API_URL", "L4_WARM", "L4_DASK_ADDRESS", "L4_TASK_RUNNER", "PREFECT_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PREFECT_PROFILES_PATH", str(tmp_path / "home" / "profiles.toml"))
    monkeypatch.setenv("L4_LOCAL_SERVER", "1")
    assert wanted(job, [], None)
    assert not wanted(job, [], "tcp://127.0.0.1:8786")
    size = sum(p.stat().st_size for p in (job / "logs").rglob("*") if p.is_file())
    monkeypatch.setenv("L4_WARM_MAX_BYTES", str(size - 1))
    assert not wanted(job, [], None)  # a large job runs in the command's own process
    monkeypatch.setenv("L4_WARM_MAX_BYTES", str(size))
    assert wanted(job, [], None)
    monkeypatch.setenv("L4_TASK_RUNNER", "process")
    assert not wanted(job, [], None)
    monkeypatch.delenv("L4_TASK_RUNNER")
    # a Prefect server of the user's own, in the environment or the active profile
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    assert not wanted(job, [], None)
    monkeypatch.delenv("PREFECT_API_URL")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "profiles.toml").write_text(
        'active = "work"\n[profiles.work]\nPREFECT_API_URL = "http://10.0.0.5:4200/api"\n')
    assert not wanted(job, [], None)
    (tmp_path / "home" / "profiles.toml").write_text('active = "work"\n[profiles.work]\n')
    assert wanted(job, [], None)
    monkeypatch.setenv("L4_WARM", "0")
    assert not wanted(job, [], None)


def test_the_fingerprint_follows_code_and_prefect_settings(tmp_path, monkeypatch):
    from flows.warm import code_fingerprint, sock_path

    a = code_fingerprint()
    assert code_fingerprint() == a
    monkeypatch.setenv("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(tmp_path / "elsewhere"))
    assert code_fingerprint() != a
    long_dir = tmp_path / ("x" * 120)
    assert len(str(sock_path(long_dir))) <= 100 and sock_path(long_dir) != long_dir / "sock"
    assert sock_path(Path("/tmp/s")) == Path("/tmp/s/sock")
