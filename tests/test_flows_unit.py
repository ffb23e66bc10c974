"""Orchestration pieces that need no Prefect server: settings, cache keys, retry policy,
event shapes (Python, shell and Kubernetes emitters agree), artifacts, prefect.yaml, and
the ``serve``/``emit`` commands' error paths."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import typer
import yaml
from hypothesis import given
from hypothesis import strategies as st
from prefect_fixtures import make_job
from typer.testing import CliRunner

from flows.artifacts import artifact_key, node_table, summary_markdown
from flows.diagnose import _baselines, _opt
from flows.events import FAILED, SUCCEEDED, job_event
from flows.serve import trigger_specs
from flows.settings import SettingsError, load_settings, retry_delays
from flows.tasks import NodeReadError, StoreError, file_identity_key, is_transient
from l4.cli_flows import register
from l4.ingest import JobError, NodeFile
from l4.scan import NodeScan

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deployments"
runner = CliRunner()


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:  # a group, so that commands are addressed by name
        pass

    register(app)
    return app


# --- settings and retry policy ----------------------------------------------------------


def test_settings_default_to_local_parsing(monkeypatch):
    for var in ("L4_DASK_ADDRESS", "L4_TASK_RUNNER", "L4_RETRIES", "L4_RETRY_DELAY"):
        monkeypatch.delenv(var, raising=False)
    s = load_settings()
    assert s.task_runner == "auto" and s.dask_address is None and s.retries == 3


def test_a_dask_address_selects_the_dask_runner(monkeypatch):
    monkeypatch.setenv("L4_DASK_ADDRESS", "tcp://10.0.0.5:8786")
    monkeypatch.delenv("L4_TASK_RUNNER", raising=False)
    s = load_settings()
    assert s.task_runner == "dask" and s.dask_address == "tcp://10.0.0.5:8786"


@pytest.mark.parametrize("var,value,needle", [
    ("L4_TASK_RUNNER", "gpu", "L4_TASK_RUNNER"),
    ("L4_RETRIES", "many", "L4_RETRIES"),
    ("L4_RETRY_DELAY", "-1", "L4_RETRY_DELAY"),
    ("L4_DASK_ADDRESS", "scheduler:8786", "tcp://"),
])
def test_bad_settings_name_the_variable(monkeypatch, var, value, needle):
    monkeypatch.setenv(var, value)
    with pytest.raises(SettingsError, match=needle):
        load_settings()


def test_backoff_doubles(monkeypatch):
    monkeypatch.setenv("L4_RETRIES", "4")
    monkeypatch.setenv("L4_RETRY_DELAY", "0.5")
    assert retry_delays(load_settings()) == [0.5, 1.0, 2.0, 4.0]


def test_only_transient_errors_are_retried():
    assert is_transient(OSError("stale NFS file handle"))
    assert is_transient(TimeoutError())
    assert is_transient(StoreError("database is locked"))
    assert is_transient(NodeReadError(NodeScan(node="n", rel="n.log", status="error",
                                               error="cannot open")))
    assert not is_transient(JobError("no node log files"))
    assert not is_transient(ValueError("bug"))
    assert not is_transient(None)


def test_node_read_error_survives_pickling():
    import pickle

    scan = NodeScan(node="n", rel="logs/n.log", status="error", error="cannot open: EIO")
    back = pickle.loads(pickle.dumps(NodeReadError(scan)))
    assert back.scan.error == "cannot open: EIO" and str(back) == "cannot open: EIO"


# --- the cache key of per-node parsing ----------------------------------------------------


def test_cache_key_follows_file_identity(tmp_path):
    path = tmp_path / "logs" / "node-0.log"
    path.parent.mkdir()
    path.write_text("line one\n")
    nf = NodeFile(node="node-0", path=path, rel="logs/node-0.log")
    first = file_identity_key(nf)
    assert first and first == file_identity_key(nf)  # unchanged file: same key

    os.utime(path, ns=(time.time_ns(), path.stat().st_mtime_ns + 10**9))
    touched = file_identity_key(nf)
    assert touched != first  # mtime changed

    with open(path, "a") as fh:
        fh.write("line two\n")
    assert file_identity_key(nf) not in (first, touched)  # content (size) changed

    other = NodeFile(node="node-9", path=path, rel="logs/node-0.log")
    assert file_identity_key(other) != file_identity_key(nf)  # node id is part of the scan


def test_cache_key_is_none_for_a_missing_file(tmp_path):
    nf = NodeFile(node="x", path=tmp_path / "gone.log", rel="gone.log")
    assert file_identity_key(nf) is None  # nothing cached; the task reports the error


# --- flow parameters as events render them -------------------------------------------------


@pytest.mark.parametrize("raw,expected", [(None, None), ("", None), ("None", None),
                                          ("null", None), (" cfg-a ", "cfg-a")])
def test_absent_parameters_are_none(raw, expected):
    assert _opt(raw) == expected


def test_baselines_accept_lists_and_comma_separated_text():
    assert _baselines(None) == [] and _baselines("") == []
    assert _baselines("/a, /b") == ["/a", "/b"]
    assert _baselines(["/a", None, "", "/b"]) == ["/a", "/b"]


# --- events: Python, shell and Kubernetes emitters send the same shape -------------------


def test_job_event_defaults_come_from_job_json(tmp_path):
    job = make_job(tmp_path / "run7", nodes=2, iterations=3, job_id="job-7", config_id="cfg-x")
    ev = job_event("failed", job)
    assert ev["event"] == FAILED
    assert ev["resource"]["prefect.resource.id"] == "l4.job.job-7"
    newest = max(p.stat().st_mtime_ns for p in (job / "logs").iterdir()) // 10**9
    assert ev["payload"] == {"job_dir": str(job.absolute()), "job_id": "job-7",
                             "config_id": "cfg-x", "baselines": [],
                             "failure_key": f"dir:{job.absolute()}@{newest}"}
    ev = job_event("succeeded", job, job_id="slurm-12", config_id="cfg-y", baselines=[job])
    assert ev["event"] == SUCCEEDED
    assert ev["payload"]["job_id"] == "slurm-12" and ev["payload"]["config_id"] == "cfg-y"
    assert ev["payload"]["baselines"] == [str(job.absolute())]


def test_job_event_for_a_bare_directory(tmp_path):
    (tmp_path / "bare").mkdir()
    ev = job_event("failed", tmp_path / "bare")
    assert ev["payload"]["job_id"] == "bare" and ev["payload"]["config_id"] is None
    assert "l4.config.id" not in ev["resource"]  # resource labels must be strings


def test_job_event_rejects_unknown_kinds(tmp_path):
    with pytest.raises(ValueError, match="failed, succeeded"):
        job_event("crashed", tmp_path)


def test_events_validate_as_prefect_events(tmp_path):
    from prefect.events import Event

    job = make_job(tmp_path / "j", nodes=1, iterations=2)
    ev = Event(**job_event("failed", job))
    assert ev.resource.id == "l4.job.j" and ev.payload["job_dir"].endswith("/j")


def _shell(script: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "SLURM_", "L4_"))}
    full["L4_SPOOL"] = os.environ.get("L4_SPOOL", "/nonexistent/l4-test-spool")
    full.update(env or {})
    return subprocess.run(["bash", str(DEPLOY / script), *args], env=full, text=True,
                          capture_output=True, timeout=60)


def test_shell_emitter_sends_what_l4_emit_sends(tmp_path):
    job = make_job(tmp_path / 'odd "name" \\ dir', nodes=1, iterations=2, job_id="j-1",
                   config_id="cfg-a")
    res = _shell("l4-emit.sh", "failed", str(job), env={"L4_EMIT_DRY_RUN": "1"})
    assert res.returncode == 0, res.stderr
    [sent] = json.loads(res.stdout)
    want = job_event("failed", job.resolve())
    for key in ("event", "resource", "payload"):
        assert sent[key] == want[key]
    from prefect.events import Event

    Event(**sent)  # the server's own model accepts it


def test_shell_emitter_errors(tmp_path):
    assert _shell("l4-emit.sh", "failed").returncode == 2
    assert _shell("l4-emit.sh", "exploded", str(tmp_path)).returncode == 2
    res = _shell("l4-emit.sh", "failed", str(tmp_path / "nope"))
    assert res.returncode == 1 and "not a directory" in res.stderr
    res = _shell("l4-emit.sh", "failed", str(tmp_path))
    assert res.returncode == 1 and "PREFECT_API_URL" in res.stderr


def _epilog(tmp_path: Path, **slurm: str) -> str:
    """Run the epilog as slurmctld would; what it logged for this one job."""
    import uuid

    log = tmp_path / f"epilog-{uuid.uuid4().hex}.log"
    env = {"L4_EPILOG_ENV": str(tmp_path / "none.env"), "L4_EPILOG_LOG": str(log),
           "L4_EMIT_DRY_RUN": "1", **slurm}
    res = _shell("slurm-epilog.sh", env=env)
    assert res.returncode == 0, res.stderr  # an epilog must never fail (Slurm drains the node)
    return log.read_text() if log.exists() else ""


def test_slurm_epilog_reports_how_the_job_ended(tmp_path):
    job = make_job(tmp_path / "jobs" / "4242", nodes=1, iterations=2)
    pattern = str(tmp_path / "jobs" / "%j")
    out = _epilog(tmp_path, SLURM_JOB_ID="4242", SLURM_JOB_EXIT_CODE="256",
                  SLURM_JOB_EXIT_CODE2="1:0", L4_JOB_DIR_PATTERN=pattern)
    assert "l4.training.job.failed" in out and f'"job_dir": "{job.resolve()}"' in out
    assert '"job_id": "4242"' in out
    out = _epilog(tmp_path, SLURM_JOB_ID="4242", SLURM_JOB_EXIT_CODE="0",
                  SLURM_JOB_EXIT_CODE2="0:0", SLURM_JOB_DERIVED_EC="0", L4_JOB_DIR_PATTERN=pattern)
    assert "l4.training.job.succeeded" in out and "failed" not in out
    # killed by a signal (time limit, hang, OOM): a failure worth diagnosing
    out = _epilog(tmp_path, SLURM_JOB_ID="4242", SLURM_JOB_EXIT_CODE="15",
                  SLURM_JOB_EXIT_CODE2="0:15", L4_JOB_DIR_PATTERN=pattern)
    assert "l4.training.job.failed" in out


def test_slurm_epilog_reads_the_job_comment(tmp_path):
    job = make_job(tmp_path / "elsewhere", nodes=1, iterations=2)
    out = _epilog(tmp_path, SLURM_JOB_ID="7", SLURM_JOB_EXIT_CODE="256",
                  SLURM_JOB_COMMENT=f"l4dir={job} l4config=llama-70b")
    assert '"config_id": "llama-70b"' in out and str(job.resolve()) in out


def test_slurm_epilog_ignores_other_jobs_and_never_fails(tmp_path):
    assert _epilog(tmp_path, SLURM_JOB_ID="1", SLURM_JOB_EXIT_CODE="256",
                   L4_JOB_DIR_PATTERN=str(tmp_path / "missing" / "%j")) == ""
    job = make_job(tmp_path / "jobs" / "9", nodes=1, iterations=2)
    log = tmp_path / "e.log"
    res = _shell("slurm-epilog.sh", env={"SLURM_JOB_ID": "9", "SLURM_JOB_EXIT_CODE": "256",
                                         "L4_JOB_DIR_PATTERN": str(job.parent / "%j"),
                                         "L4_EPILOG_LOG": str(log),
                                         "L4_EPILOG_ENV": str(tmp_path / "none.env")})
    assert res.returncode == 0  # no PREFECT_API_URL: logged, not fatal
    assert "event not sent" in log.read_text()


def _controller():
    spec = importlib.util.spec_from_file_location("l4_controller", DEPLOY / "k8s" / "l4-controller.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _k8s_job(conditions, annotations=None):
    ann = {"l4.io/job-dir": "/shared/l4-jobs/run42", "l4.io/config-id": "cfg-a"}
    ann.update(annotations or {})
    return {"metadata": {"name": "run42", "namespace": "training", "annotations": ann},
            "status": {"conditions": conditions}}


def test_k8s_controller_sends_once_per_finished_job():
    ctl = _controller()
    done = [{"type": "Complete", "status": "True"}]
    failed = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]
    assert ctl.outcome(_k8s_job(done)) == "succeeded"
    assert ctl.outcome(_k8s_job(failed)) == "failed"
    assert ctl.outcome(_k8s_job([])) is None  # still running
    assert ctl.outcome(_k8s_job(failed, {"l4.io/event-sent": "failed"})) is None
    assert ctl.outcome(_k8s_job(failed, {"l4.io/job-dir": ""})) is None
    ev = ctl.job_event(_k8s_job(failed), "failed")
    assert ev["event"] == FAILED
    assert ev["payload"] == {"job_dir": "/shared/l4-jobs/run42", "job_id": "run42",
                             "config_id": "cfg-a", "baselines": []}
    from prefect.events import Event

    Event(**ev)


def test_k8s_manifests_parse():
    docs = []
    for name in ("controller.yaml", "training-job.yaml"):
        docs += [d for d in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()) if d]
    kinds = {d["kind"] for d in docs}
    assert {"ServiceAccount", "Role", "RoleBinding", "Deployment", "Job"} <= kinds
    job = next(d for d in docs if d["kind"] == "Job")
    assert job["metadata"]["labels"]["l4.io/watch"] == "true"
    assert job["metadata"]["annotations"]["l4.io/job-dir"].startswith("/")


# --- deployments ----------------------------------------------------------------------------


def test_prefect_yaml_declares_the_served_deployments():
    doc = yaml.safe_load((DEPLOY / "prefect.yaml").read_text())
    specs = trigger_specs()
    by_name = {d["name"]: d for d in doc["deployments"]}
    assert set(by_name) == set(specs)
    for name, dep in by_name.items():
        assert dep["triggers"] == [specs[name]]  # one source of truth, two declarations
    from prefect.events import DeploymentEventTrigger
    from prefect.flows import load_flow_from_entrypoint

    for dep in doc["deployments"]:
        flow = load_flow_from_entrypoint(dep["entrypoint"])
        for trig in dep["triggers"]:
            t = DeploymentEventTrigger(**{k: v for k, v in trig.items() if k != "type"})
            assert set(t.parameters) <= set(flow.parameters.properties)
            assert "job" in t.parameters


def test_served_deployments_carry_the_triggers():
    from flows.serve import build_deployments

    diag, learn = build_deployments()
    assert diag.name == "on-failure" and learn.name == "on-success"
    assert diag.entrypoint == "flows.diagnose.diagnose_job"
    assert [t.expect for t in diag.triggers] == [{FAILED}]
    assert [t.expect for t in learn.triggers] == [{SUCCEEDED}]


# --- artifacts ------------------------------------------------------------------------------


@given(st.text(max_size=300))
def test_artifact_keys_are_always_valid(job_id):
    key = artifact_key("l4-diagnosis", job_id)
    assert key and len(key) <= 120
    assert all(c.islower() or c.isdigit() or c == "-" for c in key)
    assert key.startswith("l4-diagnosis")


def test_markdown_summary_shows_what_an_sre_needs(tmp_path):
    from l4.engine import diagnose

    job = make_job(tmp_path / "j", nodes=4, iterations=30, culprit=2)
    rep = diagnose(job, store_path=False)
    rep["root_causes"] = [{"pattern_id": "gpu-xid-79", "title": "GPU fell off the bus",
                           "category": "hardware", "similarity": 0.91,
                           "action": "drain the node | replace the GPU"}]
    rep["diagnosis_id"] = "d0123456789"
    md = summary_markdown(rep)
    assert "node-02" in md and "| 1 | node-02 |" in md
    assert f"**Stage**: {rep['stage']}" in md
    assert "fallen off the bus" in md
    assert "GPU fell off the bus" in md and "drain the node \\| replace" in md
    assert "l4 show d0123456789" in md
    table = node_table(rep)
    assert [r["node"] for r in table] == [n["node"] for n in rep["nodes"]]
    assert table[0]["rank"] == 1 and "specific" in table[0]


# --- CLI: serve and emit ----------------------------------------------------------------------


def test_emit_dry_run_prints_the_event(tmp_path):
    job = make_job(tmp_path / "j", nodes=1, iterations=2, job_id="abc")
    res = runner.invoke(cli(), ["emit", "failed", str(job), "--config-id", "cfg-z", "--dry-run"])
    assert res.exit_code == 0, res.output
    ev = json.loads(res.stdout)
    assert ev["event"] == FAILED and ev["payload"]["config_id"] == "cfg-z"


def test_emit_and_serve_need_a_configured_server(tmp_path):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    job = make_job(tmp_path / "j", nodes=1, iterations=2)
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        res = runner.invoke(cli(), ["emit", "failed", str(job)])
        assert res.exit_code == 1 and "PREFECT_API_URL" in res.output
        res = runner.invoke(cli(), ["serve"])
        assert res.exit_code == 2 and "prefect server start" in res.output
    assert "Traceback" not in res.output


def test_emit_of_a_missing_directory_is_a_clear_error(tmp_path):
    res = runner.invoke(cli(), ["emit", "failed", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "not a directory" in res.output


def test_serve_reports_an_unreachable_server(tmp_path):
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect_fixtures import free_port

    url = f"http://127.0.0.1:{free_port()}/api"
    with temporary_settings({PREFECT_API_URL: url}):
        res = runner.invoke(cli(), ["serve"])
    assert res.exit_code == 2 and "does not answer" in res.output


def test_emit_spools_when_the_server_is_unreachable(tmp_path, monkeypatch):
    """Nothing listens: the event is spooled (one whole file), the command says so and
    exits 0; a flush with the server still away keeps every file and exits 1."""
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect_fixtures import free_port

    from flows.events import spooled

    spool = tmp_path / "spool"
    monkeypatch.setenv("L4_SPOOL", str(spool))
    job = make_job(tmp_path / "j", nodes=1, iterations=2)
    with temporary_settings({PREFECT_API_URL: f"http://127.0.0.1:{free_port()}/api"}):
        res = runner.invoke(cli(), ["emit", "failed", str(job)])
        assert res.exit_code == 0 and "spooled" in res.output, res.output
        res = runner.invoke(cli(), ["emit", "failed", str(job), "--job-id", "second"])
        assert res.exit_code == 0 and "2 event(s) waiting" in res.output, res.output
        files = spooled(spool)
        assert len(files) == 2 and not list(spool.glob(".*.tmp"))
        events = [json.loads(f.read_text())[0] for f in files]
        assert [e["payload"]["job_id"] for e in events] == ["j", "second"]  # oldest first
        res = runner.invoke(cli(), ["emit", "--flush"])
        assert res.exit_code == 1 and "2 event(s) still spooled" in res.output
    assert len(spooled(spool)) == 2


def test_emit_gives_up_on_a_silent_server_within_the_timeout(tmp_path, monkeypatch):
    """A server that accepts the connection and never answers (a hung proxy)."""
    import socket

    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.setenv("L4_SPOOL", str(tmp_path / "spool"))
    monkeypatch.setenv("L4_EMIT_TIMEOUT", "1")
    job = make_job(tmp_path / "j", nodes=1, iterations=2)
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        port = srv.getsockname()[1]
        with temporary_settings({PREFECT_API_URL: f"http://127.0.0.1:{port}/api"}):
            t0 = time.monotonic()
            res = runner.invoke(cli(), ["emit", "failed", str(job)])
            took = time.monotonic() - t0
    assert res.exit_code == 0 and "spooled" in res.output and took < 10, (took, res.output)


def test_spool_that_cannot_be_written_is_a_clear_error(tmp_path, monkeypatch):
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect_fixtures import free_port

    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("L4_SPOOL", str(tmp_path / "file" / "spool"))
    job = make_job(tmp_path / "j", nodes=1, iterations=2)
    with temporary_settings({PREFECT_API_URL: f"http://127.0.0.1:{free_port()}/api"}):
        res = runner.invoke(cli(), ["emit", "failed", str(job)])
    assert res.exit_code == 1 and "could not spool" in res.output and "Traceback" not in res.output


def test_shell_emitter_spools_when_the_server_is_unreachable(tmp_path):
    from prefect_fixtures import free_port

    spool = tmp_path / "spool"
    job = make_job(tmp_path / "j", nodes=1, iterations=2)
    env = {"PREFECT_API_URL": f"http://127.0.0.1:{free_port()}/api", "L4_SPOOL": str(spool),
           "L4_EMIT_TIMEOUT": "2"}
    res = _shell("l4-emit.sh", "failed", str(job), env=env)
    assert res.returncode == 0 and "l4-emit: spooled" in res.stdout, res.stderr
    [f] = list(spool.glob("*.json"))
    [ev] = json.loads(f.read_text())
    assert ev["payload"] == job_event("failed", job.resolve())["payload"]
    res = _shell("l4-emit.sh", "--flush", env=env)
    assert res.returncode == 1 and "1 still waiting" in res.stdout
    # the epilog says where the event went
    log = tmp_path / "epilog.log"
    res = _shell("slurm-epilog.sh", env={**env, "SLURM_JOB_ID": "5", "SLURM_JOB_EXIT_CODE": "256",
                                         "L4_JOB_DIR_PATTERN": str(job),
                                         "L4_EPILOG_LOG": str(log),
                                         "L4_EPILOG_ENV": str(tmp_path / "none.env")})
    assert res.returncode == 0 and "event spooled" in log.read_text()
    assert len(list(spool.glob("*.json"))) == 2


def test_cached_scans_round_trip_and_read_back_from_the_api(tmp_path):
    from prefect._internal.result_records import ResultRecordMetadata

    from flows.tasks import SCAN_SERIALIZER
    from l4.ingest import discover
    from l4.scan import scan_node_file

    job = make_job(tmp_path / "j", nodes=1, iterations=50)
    scan = scan_node_file(discover(job).files[0])
    back = SCAN_SERIALIZER.loads(SCAN_SERIALIZER.dumps(scan))
    assert back.shapes == scan.shapes and (back.counts == scan.counts).all()
    # the API returns a task run's result metadata as {"type": ...}: it must validate
    meta = ResultRecordMetadata.model_validate({"serializer": {"type": SCAN_SERIALIZER.type}})
    assert meta.serializer.type == "l4-zpickle"
