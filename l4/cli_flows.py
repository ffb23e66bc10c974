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
    no_match: bool = typer.Option(False, "--no-match", help="record diagnoses without root-cause "
                                  "matching (no embedding model per run: cheap under a storm)"),
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
    from flows.events import flush, spool_dir
    from flows.serve import serve as run

    def flush_spool() -> None:
        """Events spooled on this machine while the server was away, once the
        deployments' triggers exist (so that they start diagnoses)."""
        res = flush(url)
        _say_flush(res)
        if res.left:
            typer.echo(f"warning: {res.left} spooled event(s) not re-sent ({res.error}); they "
                       f"stay in {spool_dir()}", err=True)

    typer.echo(f"l4: serving diagnose-job/on-failure and learn-normal/on-success against {url}",
               err=True)
    try:
        run(limit=limit, poll_seconds=poll, use_kb=not no_kb, match_root_causes=not no_match,
            on_ready=flush_spool,
            warm=os.environ.get("L4_SERVE_WARM", "1").strip().lower() in ("1", "true", "yes"))
    except Exception as exc:  # noqa: BLE001 - one line, not a traceback (server outages are
        # waited out inside; this is anything else that stopped Prefect's runner)
        _fail(f"l4 serve stopped: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
              code=1)


def _say_flush(res) -> None:
    if res.sent:
        typer.echo(f"re-sent {len(res.sent)} spooled event(s)", err=True)
    for bad in res.bad:
        typer.echo(f"warning: spooled file set aside in bad/ (not an event): {bad}", err=True)


def emit(
    outcome: Outcome | None = typer.Argument(None, help="how the job ended"),
    job_dir: Path | None = typer.Argument(None, help="the job's directory (JOB/logs/**), as the "
                                          "machine running `l4 serve` sees it"),
    job_id: str | None = typer.Option(None, "--job-id", help="default: job.json, else the directory name"),
    config_id: str | None = typer.Option(None, "--config-id", help="default: job.json"),
    baseline: list[Path] = typer.Option([], "--baseline", "-b",
                                        help="successful job of the same configuration (repeatable)"),
    end_time: str | None = typer.Option(None, "--end-time", help="when the job ended (as the "
                                        "scheduler says); with the job id it names the failure"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the event, do not send it"),
    flush_only: bool = typer.Option(False, "--flush", help="only re-send spooled events "
                                    "(oldest first); exit 1 if some are still waiting"),
) -> None:
    """Send l4.training.job.failed|succeeded for JOB_DIR to the Prefect server.

    If the server does not take it within L4_EMIT_TIMEOUT seconds (default 5), the event is
    spooled (L4_SPOOL) and re-sent by the next emit, `l4 emit --flush` or `l4 serve`."""
    from flows.events import EmitError, emit_job_event, flush, job_event, spool_dir, spooled

    if flush_only:
        if outcome is not None or job_dir is not None:
            _fail("--flush takes no job: it re-sends what is spooled")
        try:
            res = flush()
        except EmitError as exc:
            _fail(str(exc), code=1)
            return
        _say_flush(res)
        if res.left:
            _fail(f"{res.left} event(s) still spooled in {spool_dir()} ({res.error})", code=1)
        typer.echo(f"spool empty ({len(res.sent)} sent)" if not spooled() else
                   f"{len(spooled())} event(s) still spooled in {spool_dir()}")
        return
    if outcome is None or job_dir is None:
        _fail("usage: l4 emit failed|succeeded JOB_DIR [options], or l4 emit --flush")
        return
    if not job_dir.is_dir():
        _fail(f"{job_dir} is not a directory (expected the job's log directory)")
    if dry_run:
        event = job_event(outcome.value, job_dir, job_id=job_id, config_id=config_id,
                          baselines=baseline, end_time=end_time)
        typer.echo(json.dumps(event, indent=2))
        return
    try:
        d = emit_job_event(outcome.value, job_dir, job_id=job_id, config_id=config_id,
                           baselines=baseline, end_time=end_time)
    except EmitError as exc:
        _fail(str(exc), code=1)
        return
    if d.flushed:
        _say_flush(d.flushed)
    ev = d.event
    what = f"{ev['event']} for job {ev['payload']['job_id']} (event {ev['id']})"
    if d.status == "sent":
        typer.echo(f"sent {what}")
    else:
        typer.echo(f"spooled {what} in {d.path} because the server did not take it "
                   f"({d.reason}); {len(spooled(d.path.parent))} event(s) waiting, re-sent by "
                   "the next `l4 emit`, `l4 emit --flush` or `l4 serve`")


def register(app: typer.Typer) -> None:
    """Add ``serve`` and ``emit`` to the ``l4`` command."""
    app.command("serve")(serve)
    app.command("emit")(emit)
