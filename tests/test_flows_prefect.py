"""The flows against a real Prefect server (started here on 127.0.0.1 with SQLite in a temp
dir, shared by this module and stopped at its end): caching by file identity, retries,
identical reports with and without Prefect, the CLI, Dask, and the event-triggered
end-to-end run.  Timings are printed (``pytest -s``); only the cache speed-up is asserted,
because the issue asks for it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from prefect_fixtures import PYTHON, REPO, make_job, prefect_env, stop
from typer.testing import CliRunner

pytestmark = [pytest.mark.slow, pytest.mark.prefect]

VOLATILE = ("timing", "diagnosis_id")


def comparable(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in VOLATILE}


class Api:
    def __init__(self, url: str, home: Path, results: Path):
        self.url = url
        self.home = home
        self.results = results

    def env(self, **extra: str) -> dict[str, str]:
        env = prefect_env(self.home, self.url)
        env["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = str(self.results)
        env.update(L4_RETRY_DELAY="0.05", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        env.update(extra)
        return env

    def flow_runs(self, **filters) -> list:
        from prefect import get_client

        with get_client(sync_client=True) as client:
            return client.read_flow_runs(**filters)

    def task_runs_of(self, flow_run_id) -> list:
        from prefect import get_client
        from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

        with get_client(sync_client=True) as client:
            return client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))


@pytest.fixture(scope="module")
def api(prefect_api_server, tmp_path_factory):
    """The session's Prefect server (conftest.prefect_api_server), and this process pointed
    at it for this module, with result storage of this module's own."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_HOME,
        PREFECT_LOGGING_TO_API_BATCH_INTERVAL,
        PREFECT_RESULTS_LOCAL_STORAGE_PATH,
        temporary_settings,
    )

    url, home = prefect_api_server
    results = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as mp, temporary_settings({
        PREFECT_API_URL: url,
        PREFECT_HOME: str(home / "prefect-home"),
        PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(results),
        PREFECT_LOGGING_TO_API_BATCH_INTERVAL: 0.3,
    }):
        mp.setenv("L4_RETRY_DELAY", "0.05")
        mp.setenv("L4_QUIET_PREFECT_HINT", "1")
        yield Api(url, home, results)
        _flush()


def _flush() -> None:
    """Send buffered logs and events while the server still runs (else Prefect complains
    at interpreter exit that it cannot reach it)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    EventsWorker.drain_all(timeout=10)


def _latest_flow_run(api: Api, flow_name: str):
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    runs = api.flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])),
                         sort=FlowRunSort.START_TIME_DESC, limit=1)
    return runs[0]


def _wait(predicate, timeout: float, what: str, step: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _final_task_runs(api: Api, flow_run_id, prefix: str, n: int) -> list:
    """The ``n`` task runs named ``prefix...`` once the server has recorded their final
    states (task-run states reach the server as events, a moment after the flow returns)."""

    def ready():
        runs = [t for t in api.task_runs_of(flow_run_id) if t.name.startswith(prefix)]
        done = len(runs) == n and all(t.state and t.state.is_final() for t in runs)
        return runs if done else None

    return _wait(ready, 30, f"{n} final {prefix!r} task runs")


# --- caching by file identity ----------------------------------------------------------------


def test_second_run_is_served_from_cache(api, tmp_path):
    from flows.diagnose import diagnose_job_cli

    # 8 nodes x ~12 MB of logs whose many distinct lines make parsing the dominant cost
    t0 = time.perf_counter()
    job = make_job(tmp_path / "big", nodes=8, iterations=700, noise=180)
    size = sum(p.stat().st_size for p in (job / "logs").iterdir())
    print(f"\n[generated {size / 1e6:.0f} MB in {time.perf_counter() - t0:.1f} s]")
    kw = {"kb": tmp_path / "kb.duckdb", "templates": tmp_path / "t.drain3", "use_kb": False}

    first = diagnose_job_cli(job, [], **kw)
    assert first["timing"]["files_parsed"] == 8 and first["timing"]["files_cached"] == 0
    second = diagnose_job_cli(job, [], **kw)
    assert second["timing"]["files_parsed"] == 0 and second["timing"]["files_cached"] == 8
    assert comparable(second) == comparable(first)

    # Prefect itself says so: every parse task of the second run is in state Cached
    run = _latest_flow_run(api, "diagnose-job")
    parse = _final_task_runs(api, run.id, "parse ", 8)
    assert {t.state.name for t in parse} == {"Cached"}

    speedup = first["timing"]["flow_s"] / second["timing"]["flow_s"]
    print(f"[first run {first['timing']['flow_s']:.2f} s, cached run "
          f"{second['timing']['flow_s']:.2f} s: {speedup:.1f}x]")
    assert speedup >= 5

    # one file changes: only that file is parsed again
    with open(job / "logs" / "node-05.log", "a", encoding="utf-8") as fh:
        fh.write("2024-05-01 11:00:00.000 INFO rank 5: late line appended by the collector\n")
    third = diagnose_job_cli(job, [], **kw)
    assert third["timing"]["files_parsed"] == 1 and third["timing"]["files_cached"] == 7


# --- retries and files that fail for good ---------------------------------------------------------


def test_transient_errors_are_retried_with_the_io_policy(api):
    from prefect import flow, task

    from flows.settings import load_settings
    from flows.tasks import io_options, retry_if_transient
    from l4.ingest import JobError

    attempts = {"flaky": 0, "broken": 0}

    @task(retry_condition_fn=retry_if_transient)
    def flaky_read() -> str:
        attempts["flaky"] += 1
        if attempts["flaky"] <= 2:
            raise OSError("Stale file handle")  # NFS hiccup
        return "read"

    @task(retry_condition_fn=retry_if_transient)
    def broken_job() -> str:
        attempts["broken"] += 1
        raise JobError("no node log files")  # retrying cannot help

    @flow
    def reading() -> tuple:
        io = io_options(load_settings())
        ok = flaky_read.with_options(**io)(return_state=True)
        bad = broken_job.with_options(**io)(return_state=True)
        return ok, bad

    ok, bad = reading()
    assert ok.is_completed() and ok.result() == "read"
    assert attempts["flaky"] == 3  # failed twice, succeeded on the second retry
    assert bad.is_failed() and attempts["broken"] == 1


def test_a_node_file_that_fails_for_good_is_reported(api, tmp_path):
    from prefect import flow

    from flows.parsing import _parse_mapped
    from flows.settings import load_settings
    from l4.ingest import NodeFile, discover

    job = make_job(tmp_path / "j", nodes=3, iterations=20)
    files = list(discover(job).files)
    files.append(NodeFile(node="node-lost", path=job / "logs" / "node-lost.log",
                          rel="logs/node-lost.log"))  # vanished after discovery

    @flow
    def parse_all():
        out = _parse_mapped(files, load_settings())
        return out.scans, out.failed

    scans, failed = parse_all()
    assert failed == ["logs/node-lost.log"]
    assert [s.status for s in scans] == ["ok", "ok", "ok", "error"]
    assert "cannot" in scans[-1].error
    run = _latest_flow_run(api, "parse-all")
    [lost] = _final_task_runs(api, run.id, "parse j/logs/node-lost", 1)
    assert lost.state.is_failed() and lost.run_count == 4  # tried, then retried 3 times


def test_a_large_job_scans_in_a_pool_of_scanner_processes(api, tmp_path, monkeypatch):
    """Past the size threshold the parse tasks hand their scanning to plain scanner
    processes: the scans equal the engine's, a missing file is still an error scan after
    its retries, and the pool is gone afterwards."""
    import os

    from prefect import flow

    import flows.parsing as parsing
    from flows.settings import load_settings
    from flows.tasks import SCAN_POOL
    from l4.ingest import NodeFile, discover
    from l4.scan import scan_node_file

    job = make_job(tmp_path / "big", nodes=3, iterations=30)
    files = list(discover(job).files)
    files.append(NodeFile(node="node-lost", path=job / "logs" / "node-lost.log",
                          rel="logs/node-lost.log"))
    monkeypatch.setattr(parsing, "PROCESS_POOL_MIN_BYTES", 1)
    monkeypatch.setenv("L4_RETRY_DELAY", "0")
    settings = load_settings()
    assert parsing.runner_kind(settings, files, workers=2) == "pool"
    seen: list[int] = []
    real_submit = parsing.ProcessPoolExecutor.submit

    def submit(self, fn, *args, **kwargs):
        seen.append(os.getpid())
        return real_submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(parsing.ProcessPoolExecutor, "submit", submit)

    @flow
    def parse_big():
        out = parsing.parse_files(files, settings, workers=2)
        return out.scans, out.failed, out.parsed

    scans, failed, parsed = parse_big()
    assert failed == ["logs/node-lost.log"] and parsed == 3
    assert len(seen) >= 4  # every file went through the pool (the lost one with retries)
    for nf, sc in zip(files[:3], scans[:3], strict=True):
        ref = scan_node_file(nf)
        assert sc.status == "ok" and sc.node == nf.node
        assert sc.n_lines == ref.n_lines and sc.shapes == ref.shapes
        assert list(sc.counts) == list(ref.counts) and list(sc.seq) == list(ref.seq)
    assert scans[3].status == "error"
    assert SCAN_POOL[0] is None


# --- the same report with and without Prefect --------------------------------------------------


def test_flow_and_direct_engine_agree(api, tmp_path, seeded_kb):
    """Manual (``--no-prefect``) and orchestrated runs are one pipeline: same normal pool,
    same report, same root causes, both recorded where ``l4 show`` finds them.  Both start
    from a copy of the session's seeded, embedded library (embedding it is tested there)."""
    from flows.diagnose import diagnose_job_cli
    from flows.learn import learn_normal_cli
    from l4.kbstore import get_diagnosis, load_normal_rows
    from l4.pipeline import diagnose_and_record, learn_normal
    from l4.sim.simulate import simulate_case

    simulate_case(tmp_path / "case", 11)
    case = tmp_path / "case"
    kb_flow, kb_direct = tmp_path / "kb-flow.duckdb", tmp_path / "kb-direct.duckdb"
    shutil.copy(seeded_kb, kb_flow)
    shutil.copy(seeded_kb, kb_direct)
    t_flow, t_direct = tmp_path / "t-flow.drain3", tmp_path / "t-direct.drain3"

    learned = learn_normal_cli(case / "baseline-1", kb=kb_flow, templates=t_flow)
    direct_learned = learn_normal(case / "baseline-1", kb=kb_direct, templates=t_direct)
    assert learned["events"] == direct_learned["events"] > 0
    cfg = learned["config_id"]
    assert load_normal_rows(cfg, kb=kb_flow) == load_normal_rows(cfg, kb=kb_direct)

    t0 = time.perf_counter()
    via_flow = diagnose_job_cli(case / "failed", [case / "baseline-0"], kb=kb_flow,
                                templates=t_flow)
    t1 = time.perf_counter()
    direct = diagnose_and_record(case / "failed", [case / "baseline-0"], kb=kb_direct,
                                 templates=t_direct)
    t2 = time.perf_counter()
    print(f"\n[flow {t1 - t0:.2f} s, direct {t2 - t1:.2f} s]")
    assert comparable(via_flow) == comparable(direct)
    assert via_flow["baseline"]["pool"] and via_flow["root_causes_status"]
    stored = get_diagnosis(via_flow["diagnosis_id"], kb=kb_flow)
    assert stored["status"] == "pending"
    assert comparable(stored["report"]) == comparable(direct)


def test_l4_diagnose_runs_the_flow(api, tmp_path):
    from l4.cli import app

    job = make_job(tmp_path / "j", nodes=4, iterations=30, culprit=1)
    res = CliRunner().invoke(app, ["diagnose", str(job), "--format", "json", "--no-kb"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["nodes"][0]["node"] == "node-01"
    assert rep["timing"]["prefect_server"] == "configured" and "flow_s" in rep["timing"]
    res = CliRunner().invoke(app, ["diagnose", str(tmp_path / "nope"), "--no-kb"])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_artifacts_are_published(api, tmp_path):
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.diagnose import diagnose_job_cli

    job = make_job(tmp_path / "Job_42", nodes=4, iterations=30, culprit=3, job_id="Job_42")
    diagnose_job_cli(job, [], use_kb=False)
    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["l4-diagnosis-job-42", "l4-node-scores-job-42"])))
    kinds = {a.key: a for a in arts}
    assert set(kinds) == {"l4-diagnosis-job-42", "l4-node-scores-job-42"}
    assert "node-03" in kinds["l4-diagnosis-job-42"].data
    table = kinds["l4-node-scores-job-42"].data
    table = json.loads(table) if isinstance(table, str) else table
    assert table[0]["node"] == "node-03"


# --- scale-out: Dask --------------------------------------------------------------------------------


def test_dask_run_equals_local_run(api, tmp_path):
    from distributed import LocalCluster

    from flows.diagnose import diagnose_job_cli
    from l4.ingest import discover
    from l4.sim.simulate import simulate_case

    simulate_case(tmp_path / "case", 5, n_nodes=6, n_baselines=1)
    case = tmp_path / "case"
    args = (case / "failed", [case / "baseline-0"])
    t0 = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        t1 = time.perf_counter()
        on_dask = diagnose_job_cli(*args, use_kb=False, templates=tmp_path / "t-dask.drain3",
                                   dask_address=cluster.scheduler_address)
        t2 = time.perf_counter()
    local = diagnose_job_cli(*args, use_kb=False, templates=tmp_path / "t-local.drain3")
    print(f"\n[cluster start {t1 - t0:.1f} s, dask run {t2 - t1:.1f} s, "
          f"local run {local['timing']['flow_s']:.1f} s]")
    n_files = len(discover(case / "failed").files) + len(discover(case / "baseline-0").files)
    why = (on_dask["timing"], local["timing"], [f for f in on_dask["files"] if f["error"]])
    assert on_dask["timing"]["files_parsed"] == n_files, why
    # the workers stored their scans where the local run finds them (shared result storage)
    assert local["timing"]["files_cached"] == n_files, why
    assert comparable(on_dask) == comparable(local)
    run = _latest_flow_run(api, "parse-node-files")  # Dask parsing runs in its own sub-flow
    assert run.state.is_completed()


# --- automatic triggering, end to end ------------------------------------------------------------


def test_failure_event_triggers_a_stored_diagnosis(api, tmp_path, seeded_kb):
    from prefect import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    from l4.kbstore import list_diagnoses, load_normal_rows
    from l4.sim.simulate import simulate_case

    simulate_case(tmp_path / "case", 23)
    case = tmp_path / "case"
    truth = json.loads((case / "truth.json").read_text())
    kb, templates = tmp_path / "kb.duckdb", tmp_path / "templates.drain3"
    # the served flow run matches against a copy of the session's seeded, embedded library
    # (a fresh one would be embedded inside the run first: minutes on a busy 2-core host)
    shutil.copy(seeded_kb, kb)
    env = api.env(L4_KB=str(kb), L4_TEMPLATES=str(templates))
    log = open(tmp_path / "serve.log", "wb")
    serve = subprocess.Popen([PYTHON, "-m", "l4.cli", "serve", "--poll", "1"], env=env,
                             stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
                             start_new_session=True)
    try:
        def deployments():
            with get_client(sync_client=True) as client:
                deps = client.read_deployments(deployment_filter=DeploymentFilter(
                    name=DeploymentFilterName(any_=["on-failure", "on-success"])))
                autos = client.read_automations()
            names = {a.name for a in autos}
            ready = len(deps) == 2 and {"l4: diagnose a failed training job",
                                        "l4: learn from a succeeded training job"} <= names
            return deps if ready else None

        deps = _wait(deployments, 120, "l4 serve to register its deployments")
        dep_ids = {d.name: d.id for d in deps}
        time.sleep(1.0)  # the runner starts polling right after registering

        # the failure, as `l4 emit` sends it
        t_emit = time.time()
        res = subprocess.run([PYTHON, "-m", "l4.cli", "emit", "failed", str(case / "failed"),
                              "--baseline", str(case / "baseline-0")], env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        t_sent = time.time()

        def finished(dep_name: str):
            from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterDeploymentId

            runs = api.flow_runs(flow_run_filter=FlowRunFilter(
                deployment_id=FlowRunFilterDeploymentId(any_=[dep_ids[dep_name]])))
            done = [r for r in runs if r.state and r.state.is_final()]
            return done[0] if done else None

        run = _wait(lambda: finished("on-failure"), 240, "the diagnose-job run")
        t_done = time.time()
        assert run.state.is_completed(), run.state.message
        assert run.parameters["job"] == str(case / "failed")
        assert run.parameters["baselines"] == [str(case / "baseline-0")]
        diags = list_diagnoses(kb=kb)
        assert len(diags) == 1
        stored = diags[0]["report"]
        assert stored["job_id"] == truth.get("job_id", stored["job_id"])
        assert stored["nodes"][0]["node"] in truth["faulty_nodes"]
        start = run.start_time.timestamp() if run.start_time else float("nan")
        print(f"\n[emit command {t_sent - t_emit:.1f} s; event to flow start "
              f"{start - t_emit:.1f} s; event to stored diagnosis {t_done - t_emit:.1f} s; "
              f"flow run {run.total_run_time.total_seconds():.1f} s]")

        # a success, as the Slurm epilog's curl emitter sends it: the normal pool learns it
        emitter = (["bash", str(REPO / "deployments" / "l4-emit.sh")] if shutil.which("curl")
                   else [PYTHON, "-m", "l4.cli", "emit"])
        res = subprocess.run([*emitter, "succeeded", str(case / "baseline-1")], env=env,
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        run = _wait(lambda: finished("on-success"), 240, "the learn-normal run")
        assert run.state.is_completed(), run.state.message
        cfg = json.loads((case / "baseline-1" / "job.json").read_text())["config_id"]
        assert load_normal_rows(cfg, kb=kb)
    finally:
        stop(serve)
        log.close()
        if os.environ.get("L4_KEEP_SERVE_LOG"):
            print((tmp_path / "serve.log").read_text()[-4000:])
