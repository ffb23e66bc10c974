"""A Prefect server restart while ``l4 serve`` runs a diagnosis: real server on 127.0.0.1
(SQLite), stopped mid-run and started again on the same port with the same database.  The
failure must end up stored once (the run rode through, or was retried after it crashed) or
as a "diagnosis failed" entry in the inbox: never lost, never twice.

A second failure's run is left Running on the server with no process behind it: what a
run looks like whose process died while the server was away and whose runner could not
report it.  ``l4 serve`` must notice it once the server is back and diagnose it once."""

from __future__ import annotations

import time

import pytest
from prefect_fixtures import free_port, make_job, prefect_server
from test_delivery_prefect import Serve, _automations, _diagnoses, _env, _runs, _wait

pytestmark = [pytest.mark.slow, pytest.mark.prefect]


def _running(url: str):
    runs = _runs(url)
    return [r for r in runs if r.state and r.state.is_running()]


def _orphan_run(url: str, job) -> object:
    """A run of the diagnose deployment that the server shows Running, with no process."""
    from prefect import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Running

    with temporary_settings({PREFECT_API_URL: url}), get_client(sync_client=True) as client:
        dep = client.read_deployment_by_name("diagnose-job/on-failure")
        run = client.create_flow_run_from_deployment(dep.id, parameters={"job": str(job)},
                                                     state=Running())
    return run.id


@pytest.mark.parametrize("retries", ["5", "1"], ids=["rides-through", "outlasts-retries"])
def test_a_server_restart_mid_run_loses_and_duplicates_nothing(tmp_path, retries):
    """``retries``: Prefect's client retries (5 by default: about 60 s of backoff); with 1,
    the same restart outlasts them, so flow-run processes and the runner see the server gone."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.events import deliver, job_event

    home, port = tmp_path / "prefect", free_port()
    kb = tmp_path / "kb.duckdb"
    job = make_job(tmp_path / "jobs" / "restart", nodes=4, iterations=400, noise=20)
    orphan_job = make_job(tmp_path / "jobs" / "orphan", nodes=3, iterations=20, culprit=1)
    url = f"http://127.0.0.1:{port}/api"
    env = _env(home, url, tmp_path, PREFECT_CLIENT_MAX_RETRIES=retries)
    first = prefect_server(home, port=port)
    first.__enter__()
    serve = None
    try:
        serve = Serve(env, tmp_path, "--no-match")
        _wait(lambda: _automations(url) >= 2, 120, "the triggers")
        time.sleep(2.0)
        with temporary_settings({PREFECT_API_URL: url}):
            sent = deliver(job_event("failed", job))
        assert sent.status == "sent"
        _wait(lambda: _running(url), 180, "the diagnosis to start running", step=0.2)
        t_stop = time.monotonic()
        orphan = _orphan_run(url, orphan_job)
    finally:
        first.__exit__(None, None, None)  # the server goes away mid-run
    try:
        # with one retry the outage must outlast the runner's failed polls however fast the
        # machine restarts a server (14 s in all was too short on a quiet host)
        time.sleep(8.0 if retries == "5" else 25.0)
        with prefect_server(home, port=port):
            t_back = time.monotonic()

            def settled():
                assert serve.proc.poll() is None, "l4 serve died: " + serve.text()[-3000:]
                runs = _runs(url)
                stored = _diagnoses(kb)
                diags = [d for d in stored if d["job_id"] == "restart"]
                return (diags and any(d["job_id"] == "orphan" for d in stored) and runs
                        and all(r.state.is_final() for r in runs) and (runs, diags))

            runs, diags = _wait(settled, 600, "the failure to be stored or listed as failed",
                                step=1.0)
            time.sleep(5.0)  # nothing else may arrive later
            runs, stored = _runs(url), _diagnoses(kb)
            diags = [d for d in stored if d["job_id"] == "restart"]
            orphans = [d for d in stored if d["job_id"] == "orphan"]
            alive = serve.proc.poll() is None
    finally:
        if serve is not None:
            serve.close()
    states = sorted(r.state.name for r in runs if r.id != orphan
                    and r.parameters.get("job") == str(job))
    recovered = next(r for r in runs if r.id == orphan)
    assert recovered.state.is_crashed() and "Prefect server went away" in recovered.state.message
    assert len(orphans) == 1 and orphans[0]["report"]["nodes"][0]["node"] == "node-01", orphans
    print(f"\n[server restart: down {t_back - t_stop:.0f} s mid-run; runs {states}; "
          f"{len(diags)} diagnosis stored ({diags[0]['report'].get('stage')})]")
    assert alive, "l4 serve must survive a server restart"
    assert len(diags) == 1, diags  # none lost, none twice
    [diag] = diags
    assert diag["failure_key"] == sent.event["payload"]["failure_key"]
    assert all(r.state.is_final() for r in runs)
    if "diagnosis_failed" in diag["report"]:  # gave up: then it is in the inbox
        assert diag["status"] == "pending" and "Completed" not in states
    else:
        assert diag["report"]["nodes"][0]["node"] == "node-02" and "Completed" in states
    log = serve.text()
    if retries == "1":  # the outage outlasted the runner: l4 serve waited and served again
        assert "the Prefect server stopped answering" in log and "is back after" in log, log[-3000:]
    else:  # the runner rode through; its watchdog found the run without a process
        assert "ended while the Prefect server was away" in log, log[-3000:]
