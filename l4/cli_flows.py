"""``l4 serve`` and ``l4 emit``: the commands that make diagnosis automatic.

Registered on the main ``l4`` app by ``l4.cli``.  Prefect is imported only inside the
commands, so ``l4 --help`` and the other commands do not pay for it.
"""

from __future__ import annotations

import json
import os
from enum import StrEnum
from pathlib import Path

import typer

from l4.cli_errors import fail as _fail


class Outcome(StrEnum):
    failed = "failed"
    succeeded = "succeeded"


def _api_url() -> str | None:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or None


def _check_server(url: str) -> str | None:
    """None when the server answers, else a one-line reason."""
    import httpx

    try:
        r = httpx.get(url.rstrip("/") + "/health", timeout=5)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if r.status_code == 200 else f"HTTP {r.status_code}"


def serve(
    limit: int | None = typer.Option(None, "--limit", help="most flow runs at once (default: no limit)"),
    poll: float = typer.Option(1.0, "--poll", min=0.2, help="seconds between checks for new runs "
                               "(bounds the event-to-start latency)"),
    kb: Path | None = typer.Option(None, "--kb", envvar="L4_KB", help="knowledge-base file"),
    templates: Path | None = typer.Option(None, "--templates", envvar="L4_TEMPLATES",
                                          help="template store file"),
    dask_address: str | None = typer.Option(
        None, "--dask-address", envvar="L4_DASK_ADDRESS",
        help="parse node files on this Dask cluster (tcp://host:8786); logs must be on "
        "storage the workers can read at the same paths"),
    no_kb: bool = typer.Option(False, "--no-kb", help="diagnose without root causes and recording"),
) -> None:
    """Run the diagnose-job and learn-normal deployments, triggered by l4.training.job.* events."""
    url = _api_url()
    if not url:
        _fail("l4 serve needs a Prefect server that emitters can reach: run `prefect server "
              "start` (or use Prefect Cloud) and `prefect config set PREFECT_API_URL=<its api "
              "url>`, e.g. http://127.0.0.1:4200/api")
    why = _check_server(url)
    if why:
        _fail(f"the Prefect server at {url} does not answer ({why}); is `prefect server start` running?")
    # Flow runs are subprocesses of this one: they read these settings from the environment.
    for name, value in (("L4_KB", kb), ("L4_TEMPLATES", templates),
                        ("L4_DASK_ADDRESS", dask_address)):
        if value:
            os.environ[name] = str(value)
    from flows.settings import SettingsError, load_settings

    try:
        load_settings()
    except SettingsError as exc:
        _fail(str(exc))
    from flows.serve import serve as run

    typer.echo(f"l4: serving diagnose-job/on-failure and learn-normal/on-success against {url}",
               err=True)
    run(limit=limit, poll_seconds=poll, use_kb=not no_kb)


def emit(
    outcome: Outcome = typer.Argument(..., help="how the job ended"),
    job_dir: Path = typer.Argument(..., help="the job's directory (JOB/logs/**), as the machine "
                                   "running `l4 serve` sees it"),
    job_id: str | None = typer.Option(None, "--job-id", help="default: job.json, else the directory name"),
    config_id: str | None = typer.Option(None, "--config-id", help="default: job.json"),
    baseline: list[Path] = typer.Option([], "--baseline", "-b",
                                        help="successful job of the same configuration (repeatable)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the event, do not send it"),
) -> None:
    """Send l4.training.job.failed|succeeded for JOB_DIR to the Prefect server."""
    from flows.events import EmitError, emit_job_event, job_event

    if not job_dir.is_dir():
        _fail(f"{job_dir} is not a directory (expected the job's log directory)")
    if dry_run:
        event = job_event(outcome.value, job_dir, job_id=job_id, config_id=config_id,
                          baselines=baseline)
        typer.echo(json.dumps(event, indent=2))
        return
    try:
        event = emit_job_event(outcome.value, job_dir, job_id=job_id, config_id=config_id,
                               baselines=baseline)
    except EmitError as exc:
        _fail(str(exc), code=1)
        return
    typer.echo(f"sent {event['event']} for job {event['payload']['job_id']} (event {event['id']})")


def register(app: typer.Typer) -> None:
    """Add ``serve`` and ``emit`` to the ``l4`` command."""
    app.command("serve")(serve)
    app.command("emit")(emit)
