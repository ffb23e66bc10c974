"""The diagnose-job flow publishes the HTML report: it writes the file (where ``--html`` says,
and next to the knowledge base when served) and links it from the flow run's artifacts.
Real Prefect server on 127.0.0.1."""

from __future__ import annotations

import pytest
from prefect_fixtures import make_job

pytestmark = [pytest.mark.prefect, pytest.mark.slow]


@pytest.fixture(scope="module")
def api(prefect_api_server, tmp_path_factory):
    """The session's Prefect server (conftest.prefect_api_server), this module's own result
    storage."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_HOME,
        PREFECT_RESULTS_LOCAL_STORAGE_PATH,
        temporary_settings,
    )

    url, home = prefect_api_server
    with pytest.MonkeyPatch.context() as mp, temporary_settings({
        PREFECT_API_URL: url,
        PREFECT_HOME: str(home / "prefect-home"),
        PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(tmp_path_factory.mktemp("results-html")),
    }):
        mp.setenv("L4_QUIET_PREFECT_HINT", "1")
        yield url
        from prefect.events.worker import EventsWorker
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=10)
        EventsWorker.drain_all(timeout=10)


def test_flow_writes_and_links_the_html_report(api, tmp_path, monkeypatch):
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.diagnose import diagnose_job

    kb = tmp_path / "kbdir" / "kb.duckdb"
    monkeypatch.setenv("L4_KB", str(kb))
    job = make_job(tmp_path / "Job_7", nodes=4, iterations=30, culprit=2, job_id="Job_7")
    asked = tmp_path / "asked.html"
    rep = diagnose_job(job=str(job), use_kb=False, html=str(asked), store_html=True)
    stored = kb.parent / "reports" / "job-job-7.html"  # not recorded: named by the job
    for page in (asked, stored):
        text = page.read_text()
        assert rep["nodes"][0]["node"] in text and text.count("<svg") == 3
    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["l4-html-job-7"])))
    data = [str(a.data) for a in arts]
    for page in (asked, stored):
        assert any(page.resolve().as_uri() in d for d in data), data


def test_l4_diagnose_html_through_the_flow(api, tmp_path):
    from typer.testing import CliRunner

    from l4.cli import app

    job = make_job(tmp_path / "j", nodes=4, iterations=30, culprit=1)
    out = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["diagnose", str(job), "--no-kb", "--html", str(out)])
    assert res.exit_code == 0, res.output
    assert f"HTML report: {out}" in res.stderr
    page = out.read_text()
    assert "node-01" in page and page.count("<svg") == 3 and "flow_s" in page
