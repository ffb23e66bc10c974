"""The ``diagnose-job`` flow: discover node files -> parse each (mapped, cached) -> merge ->
cross-job filter -> spatial -> temporal -> indicators -> report -> root causes -> store ->
artifacts.

The same flow serves ``l4 diagnose`` (through :func:`diagnose_job_cli`) and the
event-triggered deployment (``l4 serve``), so a manual and an automatic diagnosis run the
same code.  ``l4 diagnose --no-prefect`` calls the same library functions without Prefect
(``l4.pipeline.diagnose_and_record``); the tests check both give the same report.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote

from flows.artifacts import artifact_key, stored_html_path
from flows.parsing import parse_files
from flows.recovery import record_failed, retry_crashed
from flows.settings import load_settings
from flows.tasks import (
    discover_baseline,
    discover_job,
    io_options,
    load_pool,
    merge,
    publish,
    retry_if_transient,
    root_causes,
    run_analysis,
    store_report,
)
from l4.chartdata import attach_healthy_band
from l4.progress import reporter


def _opt(value: object) -> str | None:
    """Event templates render a missing value as None, '' or 'None': all mean absent."""
    if value is None:
        return None
    s = str(value).strip()
    return None if s in ("", "None", "null") else s


def _baselines(value: object) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):  # one path, or a comma-separated list from a shell
        return [p for p in (s.strip() for s in value.split(",")) if p]
    return [str(v) for v in value if _opt(v)]  # type: ignore[union-attr]


def run_name(verb: str):
    """A flow-run namer: "<verb> <job directory name>", read from the run's parameters."""

    def name() -> str:
        job = flow_run.parameters.get("job") or "job"
        return f"{verb} {Path(str(job)).name}"

    return name


@flow(name="diagnose-job", flow_run_name=run_name("diagnose"), persist_result=False,
      on_crashed=[retry_crashed], on_failure=[record_failed])
def diagnose_job(
    job: str,
    baselines: list[str] | str | None = None,
    config_id: str | None = None,
    job_id: str | None = None,
    kb: str | None = None,
    templates: str | None = None,
    use_kb: bool = True,
    workers: int | None = None,
    dask_address: str | None = None,
    html: str | None = None,
    store_html: bool = False,
    failure_key: str | None = None,
    force: bool = False,
    attempt: int = 1,
    match_root_causes: bool = True,
) -> dict:
    """Diagnose one failed job directory; returns the report (``l4.report`` contract).

    ``job``/``baselines``: directories as the machine running the flow sees them (shared
    storage when the flow runs elsewhere).  ``config_id``/``job_id`` override job.json.
    ``kb``/``templates``: knowledge-base and template-store files (default: ``L4_KB``,
    ``L4_TEMPLATES``, else the user data dir).  ``dask_address`` parses on that cluster.
    ``html``: also write the HTML report there; ``store_html`` (what ``l4 serve`` sets):
    write it next to the knowledge base, ``reports/<diagnosis id>.html``.  Either way a
    link artifact points at the file.
    ``failure_key``: the event's id of the failure (default: derived from ``job``); a
    failure already diagnosed from the same logs returns the stored report unless ``force``.
    ``attempt``: which try this is (a crashed served run is retried, ``flows.recovery``).
    ``match_root_causes=False`` stores the diagnosis without loading the embedding model.
    """
    t0 = time.perf_counter()
    settings = load_settings()
    if _opt(dask_address):
        settings = replace(settings, dask_address=_opt(dask_address), task_runner="dask")
    io = io_options(settings)
    kb, templates = _opt(kb), _opt(templates)
    fid = None
    if use_kb:  # one failure, one diagnosis (l4.idempotency)
        fid, previous = find_previous.with_options(**io)(str(job), _opt(failure_key), kb,
                                                          bool(force))
        if previous is not None:
            get_run_logger().info("already diagnosed as %s from the same logs; not again "
                                  "(force=True diagnoses again)", previous["diagnosis_id"])
            return previous

    spec = discover_job.with_options(**io)(str(job), _opt(config_id), _opt(job_id))
    base_specs, skipped = [], []
    for b in _baselines(baselines):
        bspec, why = discover_baseline.with_options(**io)(b)
        if bspec is None:
            skipped.append(why)
        else:
            base_specs.append(bspec)
    all_files = list(spec.files) + [f for s in base_specs for f in s.files]
    parsed = parse_files(all_files, settings, workers)
    n = len(spec.files)
    scans, base_scans, k = parsed.scans[:n], [], n
    for bs in base_specs:
        base_scans.append(parsed.scans[k:k + len(bs.files)])
        k += len(bs.files)

    pool = None
    if use_kb:
        state = load_pool.with_options(**io)(spec.config_id, kb, return_state=True)
        if state.is_completed():
            pool = state.result()
        else:
            get_run_logger().warning("normal pool unavailable (%s)", state.message)
    t_scan = time.perf_counter()

    reporter().step("merging templates")
    # quote(): hand big values to tasks as they are; Prefect would otherwise walk every
    # list inside them looking for futures (seconds for a large job).
    merged = merge.with_options(**io)(quote(spec), quote(scans), quote(base_specs),
                                      quote(base_scans), skipped, quote(pool), templates)
    t_merge = time.perf_counter()
    reporter().step("analysing nodes and iterations")
    rep = run_analysis(merged.failed, merged)
    attach_healthy_band(rep, merged.healthy)
    t_end = time.perf_counter()
    rep["timing"] = {
        "scan_s": round(t_scan - t0, 3),
        "merge_s": round(t_merge - t_scan, 3),
        "analyze_s": round(t_end - t_merge, 3),
        "total_s": round(t_end - t0, 3),
        "files_parsed": parsed.parsed,
        "files_cached": parsed.cached,
        "files_failed": len(parsed.failed),
    }
    if use_kb:
        from l4.idempotency import stamp

        stamp(rep, fid)
        if match_root_causes:
            reporter().step("matching root causes")
            rep = root_causes(quote(rep), kb)
        reporter().step("recording the diagnosis")
        state = store_report.with_options(**io)(quote(rep), kb, return_state=True)
        if state.is_completed():
            rep = state.result()
        else:
            rep.setdefault("warnings", []).append(
                f"diagnosis not recorded: {state.message or 'knowledge base unavailable'}"
            )
    pub = publish(quote(rep), return_state=True)
    if not pub.is_completed():
        get_run_logger().warning("artifacts not published (%s)", pub.message)
    targets = [_opt(html)] if _opt(html) else []
    if store_html:
        targets.append(str(stored_html_path(rep, kb)))
    for target in targets:
        state = publish_html(quote(rep), target, return_state=True)
        if not state.is_completed():
            get_run_logger().warning("HTML report not written (%s)", state.message)
    return rep


@task(name="publish HTML report", cache_policy=NO_CACHE, persist_result=False)
def publish_html(rep: dict, path: str) -> str:
    """Write the self-contained HTML report and link it from the flow run's artifacts."""
    from prefect.artifacts import create_link_artifact

    from l4.htmlreport import write_html

    out = write_html(rep, path).resolve()
    job = rep.get("job_id")
    create_link_artifact(
        link=out.as_uri(), link_text=f"HTML report: {out.name}",
        key=artifact_key("l4-html", job),
        description=f"self-contained HTML report of {job} (on the machine that ran the flow)",
    )
    return str(out)


@task(name="find an earlier diagnosis", cache_policy=NO_CACHE, persist_result=False,
      retry_condition_fn=retry_if_transient)
def find_previous(job: str, failure_key: str | None, kb: str | None, force: bool):
    """(failure id, the stored report of the same failure and logs or None)."""
    from l4.idempotency import identify, previous_report

    fid = identify(job, failure_key)
    if force:
        return fid, None
    try:
        return fid, previous_report(fid, kb=Path(kb) if kb else None)
    except Exception as exc:  # a broken KB must not stop a diagnosis; storing reports it
        get_run_logger().warning("cannot look up earlier diagnoses (%s)", exc)
        return fid, None


class _QuietFilter(logging.Filter):
    """Drop Prefect's INFO chatter and its failure tracebacks from the terminal; a failure
    still reaches the caller as an exception (and the server keeps every log line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("prefect"):
            return True
        return record.levelno == logging.WARNING


@contextlib.contextmanager
def quiet_console() -> Iterator[None]:
    """Keep Prefect's per-task log lines off the terminal of an interactive ``l4`` command
    (they still reach the server and its UI); ``L4_VERBOSE=1`` shows them."""
    if os.environ.get("L4_VERBOSE"):
        yield
        return
    from prefect.logging.handlers import PrefectConsoleHandler

    handlers = [h for h in logging.getLogger().handlers if isinstance(h, PrefectConsoleHandler)]
    quiet = _QuietFilter()
    for h in handlers:
        h.addFilter(quiet)
    try:
        yield
    finally:
        for h in handlers:
            h.removeFilter(quiet)


def _server_configured() -> bool:
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value())


@contextlib.contextmanager
def _api_url_env(url: str) -> Iterator[None]:
    """``PREFECT_API_URL`` for this process (its settings) and for every worker it starts
    (the environment a process pool or Dask worker inherits), restored afterwards."""
    from prefect.context import refresh_global_settings_context
    from prefect.settings import PREFECT_API_URL, temporary_settings

    old = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url
    refresh_global_settings_context()  # what threads and atexit handlers read
    try:
        with temporary_settings({PREFECT_API_URL: url}):
            yield
    finally:
        if old is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = old
        refresh_global_settings_context()


def _drain() -> None:
    """Send the buffered logs and events while the server's URL is still set: sent at
    interpreter exit instead, they would find no URL and start a temporary server."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    EventsWorker.drain_all(timeout=10)


def _temporary_server_url() -> str:
    """Start Prefect's temporary server in this process (stopped when it exits) and return
    its URL, so that workers share it instead of each starting one of their own."""
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    server.start(timeout=int(os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"]))
    return server.api_url


def _choose_server() -> tuple[str | None, str]:
    """(API URL to use or None for the configured one, which kind of server it is):
    ``configured`` (PREFECT_API_URL), ``local`` (the one :mod:`flows.localserver` keeps
    running) or ``temporary`` (only when the local one cannot start; ``L4_LOCAL_SERVER=0``
    asks for it)."""
    if _server_configured():
        return None, "configured"
    if os.environ.get("L4_LOCAL_SERVER", "1").strip().lower() not in ("0", "false", "no"):
        from flows.localserver import ServerStartError, start

        try:
            srv, started = start()
        except (ServerStartError, OSError) as exc:
            print(f"l4: the local Prefect server did not start ({str(exc)[:200]}); "
                  "using a temporary one for this command", file=sys.stderr)
        else:
            if started:
                print(f"l4: started a local Prefect server for this and later commands: "
                      f"{srv.ui_url} (`l4 server stop` stops it)", file=sys.stderr)
            return srv.url, "local"
    # the temporary server has no internet to send telemetry to; spare the error line
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # Prefect waits 20 s for it, which a busy machine can miss (the CLI then runs the
    # same steps without Prefect)
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "60")
    if not os.environ.get("L4_QUIET_PREFECT_HINT"):
        print(
            "l4: no Prefect server configured (PREFECT_API_URL), so Prefect starts a temporary "
            "one (6-14 s). For fast runs keep one running: `l4 server start`; "
            "or run the engine directly: `l4 diagnose --no-prefect`.",
            file=sys.stderr,
        )
    try:
        return _temporary_server_url(), "temporary"
    except Exception as exc:  # noqa: BLE001 - the CLI runs the same steps without Prefect
        raise RuntimeError(f"the temporary Prefect API server did not start: {exc}") from exc


def diagnose_job_cli(job: Path, baselines: list[Path], *, kb: Path | None = None,
                     templates: Path | None = None, use_kb: bool = True,
                     workers: int | None = None, dask_address: str | None = None,
                     html: Path | None = None,
                     force: bool = False) -> dict:
    """What ``l4 diagnose`` runs: the ``diagnose-job`` flow, in this process.

    Without ``PREFECT_API_URL`` the local server of :mod:`flows.localserver` is started
    once (or found running) and used; only when it cannot start does a temporary server
    serve this one command.  Either way its URL is put in the environment, so process-pool
    and Dask workers talk to the same server.  The returned report's ``timing.flow_s`` is
    the whole run including Prefect's own overhead.
    """
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    url, kind = _choose_server()
    t0 = time.perf_counter()
    # No heartbeats for a run that lasts seconds: saves ~1 s waiting on the thread at exit.
    with contextlib.ExitStack() as stack:
        if url is not None:
            stack.enter_context(_api_url_env(url))
        stack.enter_context(temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}))
        stack.enter_context(quiet_console())
        rep = diagnose_job(
            job=str(job),
            baselines=[str(b) for b in baselines],
            kb=str(kb) if kb else None,
            templates=str(templates) if templates else None,
            use_kb=use_kb,
            workers=workers,
            dask_address=dask_address,
            html=str(html) if html else None,
            force=force,
        )
        _drain()
    rep.setdefault("timing", {})["flow_s"] = round(time.perf_counter() - t0, 3)
    rep["timing"]["prefect_server"] = kind
    return rep
