"""The events that start l4 automatically, and how to send one.

A training job that ends emits ``l4.training.job.failed`` or ``l4.training.job.succeeded``
with the location of its logs.  The deployments served by ``l4 serve`` are triggered by
these events (``flows.serve``); ``l4 emit``, ``deployments/slurm-epilog.sh`` and the
Kubernetes example all send exactly this shape::

    {"event": "l4.training.job.failed",
     "resource": {"prefect.resource.id": "l4.job.<job id>", "prefect.resource.name": "<job id>",
                  "l4.job.dir": "/shared/jobs/<job id>"},
     "payload": {"job_dir": "/shared/jobs/<job id>", "job_id": "<job id>",
                 "config_id": "<config id>" | null, "baselines": ["/shared/jobs/..."],
                 "failure_key": "job:<job id>@<end time>" | "dir:<log dir>@<newest mtime>"}}

Every payload key is always present (null when unknown): the deployment triggers read
them by name.  ``failure_key`` names the failure (``l4.ingest.failure_key``), so the same
failure delivered twice is diagnosed once.

Events are never lost: when the server does not accept an event within a few seconds
(``L4_EMIT_TIMEOUT``, default 5), it is written to the spool (``L4_SPOOL``, default
<user data dir>/l4/spool), one file per event, atomically (temp file, fsync, rename).
Every later emit, ``l4 emit --flush`` and ``l4 serve`` at start re-send the spool oldest
first and delete a file only after the server answered 2xx.  The shell emitter
(``deployments/l4-emit.sh``) writes and flushes the same files.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

FAILED = "l4.training.job.failed"
SUCCEEDED = "l4.training.job.succeeded"
EVENTS = {"failed": FAILED, "succeeded": SUCCEEDED}
RESOURCE_PREFIX = "l4.job."
SPOOL_SUFFIX = ".json"


class EmitError(RuntimeError):
    """The event could not be sent (the message says why and what to do)."""


class Unreachable(EmitError):
    """The server did not accept the event in time: worth spooling and trying again."""


def _job_json(job_dir: Path) -> dict:
    from l4.ingest import open_regular

    try:
        with open_regular(job_dir / "job.json") as fh:
            meta = json.loads(fh.read(1 << 20).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _scalar(value: object) -> str | None:
    return str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else None


def job_event(kind: str, job_dir: str | Path, *, job_id: str | None = None,
              config_id: str | None = None, baselines: Sequence[str | Path] = (),
              end_time: str | None = None) -> dict:
    """The event for a job that ended (``kind``: failed or succeeded).

    ``job_id``/``config_id`` default to the job's ``job.json`` (then the directory name),
    so an emitter that knows only the directory still sends a complete event.
    ``end_time`` (when the scheduler knows it) makes the failure key ``job:<id>@<end>``.
    """
    from l4.ingest import failure_key

    if kind not in EVENTS:
        raise ValueError(f"event kind must be one of {', '.join(EVENTS)}, not {kind!r}")
    root = Path(job_dir).expanduser().absolute()
    meta = _job_json(root)
    jid = str(job_id or _scalar(meta.get("job_id")) or root.name)
    cfg = config_id or _scalar(meta.get("config_id"))
    resource = {
        "prefect.resource.id": f"{RESOURCE_PREFIX}{jid}",
        "prefect.resource.name": jid,
        "l4.job.dir": str(root),
    }
    if cfg:
        resource["l4.config.id"] = cfg
    return {
        "event": EVENTS[kind],
        "resource": resource,
        "payload": {
            "job_dir": str(root),
            "job_id": jid,
            "config_id": cfg,
            "baselines": [str(Path(b).expanduser().absolute()) for b in baselines],
            "failure_key": failure_key(root, job_id=jid if end_time else None,
                                       end_time=end_time),
        },
    }


def _api_url() -> str | None:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or None


def _timeout() -> float:
    try:
        return max(0.2, float(os.environ.get("L4_EMIT_TIMEOUT", "5")))
    except ValueError:
        return 5.0


def _headers() -> dict[str, str]:
    from prefect.settings import PREFECT_API_KEY

    key = os.environ.get("PREFECT_API_KEY") or PREFECT_API_KEY.value()
    return {"Authorization": f"Bearer {key}"} if key else {}


def _auth():
    auth = os.environ.get("PREFECT_API_AUTH_STRING")
    if auth and ":" in auth and not _headers():
        user, _, password = auth.partition(":")
        return (user, password)
    return None


def complete(event: dict) -> dict:
    """The event as the server's ``POST /events`` takes it: with ``id`` and ``occurred``."""
    out = dict(event)
    out.setdefault("id", str(uuid.uuid4()))
    out.setdefault("occurred", datetime.now(UTC).isoformat().replace("+00:00", "Z"))
    out.setdefault("payload", {})
    return out


def post(event: dict, url: str | None = None) -> str:
    """Send one complete event; returns its id.  :class:`Unreachable` when the server does
    not answer 2xx within ``L4_EMIT_TIMEOUT`` seconds, :class:`EmitError` for bad config.

    Plain ``POST <api>/events``, the call the shell emitter makes: its 204 means the server
    took the event (a websocket send has no such answer), and it needs no Prefect import.
    """
    import httpx

    url = url or _api_url()
    if not url:
        raise EmitError(
            "no Prefect server configured: set PREFECT_API_URL (e.g. run `prefect server start` "
            "and `prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api`) where `l4 serve` "
            "is connected too"
        )
    body = [{k: event[k] for k in ("id", "occurred", "event", "resource", "payload",
                                   "related") if k in event}]
    try:
        r = httpx.post(url.rstrip("/") + "/events", json=body, headers=_headers(), auth=_auth(),
                       timeout=_timeout())
    except httpx.HTTPError as exc:
        raise Unreachable(f"{url} unreachable: {type(exc).__name__}: {exc}") from exc
    if r.status_code // 100 != 2:
        raise Unreachable(f"{url} answered HTTP {r.status_code}: {r.text[:200]}")
    return str(event["id"])


# --- the spool: events waiting for the server ------------------------------------------------


def spool_dir() -> Path:
    """``$L4_SPOOL``, else <user data dir>/l4/spool (the shell emitter uses the same)."""
    env = os.environ.get("L4_SPOOL")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("l4", appauthor=False)) / "spool"


def spooled(spool: Path | None = None) -> list[Path]:
    """The spooled event files, oldest first (names start with the time in ns)."""
    d = spool or spool_dir()
    try:
        names = [p for p in d.iterdir() if p.name.endswith(SPOOL_SUFFIX) and not p.name.startswith(".")]
    except OSError:  # no spool yet, or a path that cannot be one (spool_event says why)
        return []
    return sorted(names, key=lambda p: p.name)


def spool_event(event: dict, spool: Path | None = None) -> Path:
    """Write one complete event as its own file, atomically: a reader (or a crash) sees the
    whole event or nothing.  Raises OSError when even that is impossible (disk full)."""
    d = spool or spool_dir()
    d.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns():020d}-{event['id']}{SPOOL_SUFFIX}"
    tmp = d / f".{name}.tmp"
    data = json.dumps([event], sort_keys=True).encode()
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, d / name)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return d / name


@contextlib.contextmanager
def _flush_lock(d: Path) -> Iterator[bool]:
    """One flusher at a time per spool (cron and an emit may overlap); False: busy."""
    import fcntl

    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".lock", "a+b") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@dataclass
class FlushResult:
    """What a flush did: events sent, still waiting, set aside as unreadable."""

    sent: list[str] = field(default_factory=list)
    left: int = 0
    bad: list[str] = field(default_factory=list)
    error: str | None = None  # why the rest was kept (server unreachable)


def _read_spooled(path: Path) -> dict:
    doc = json.loads(path.read_bytes())
    ev = doc[0] if isinstance(doc, list) and len(doc) == 1 else doc
    if not isinstance(ev, dict) or not {"id", "event", "resource"} <= set(ev):
        raise ValueError("not an l4 event")
    return ev


def flush(url: str | None = None, spool: Path | None = None) -> FlushResult:
    """Re-send spooled events oldest first; delete each file only after the server took it.

    Stops at the first event the server does not take (it is down: keep the order).  A
    file that is not an event is moved to ``bad/`` (kept for a person, never re-sent).
    """
    d = spool or spool_dir()
    res = FlushResult()
    if not spooled(d):
        return res
    with _flush_lock(d) as mine:
        if not mine:
            res.left = len(spooled(d))
            res.error = "another flush is running"
            return res
        files = spooled(d)
        for i, path in enumerate(files):
            try:
                ev = _read_spooled(path)
            except FileNotFoundError:
                continue  # sent by someone else meanwhile
            except (OSError, ValueError) as exc:
                (d / "bad").mkdir(exist_ok=True)
                os.replace(path, d / "bad" / path.name)
                res.bad.append(f"{path.name}: {exc}")
                continue
            try:
                post(ev, url)
            except Unreachable as exc:
                res.left = len(files) - i
                res.error = str(exc)
                return res
            path.unlink(missing_ok=True)
            res.sent.append(str(ev["id"]))
    return res


@dataclass
class Delivery:
    """Where one event went: ``sent`` or ``spooled`` (with the file and the reason)."""

    event: dict
    status: str
    path: Path | None = None
    reason: str | None = None
    flushed: FlushResult | None = None


def deliver(event: dict, url: str | None = None, spool: Path | None = None) -> Delivery:
    """Send ``event`` after whatever is spooled (oldest first); spool it if the server is
    unreachable.  Never loses the event: it is either accepted or on disk when this returns
    (the only exception is a spool that cannot be written, raised as EmitError)."""
    url = url or _api_url()
    if not url:
        post(event, url)  # raises the configuration error
    ev = complete(event)
    first = flush(url, spool)
    reason = first.error if first.left and first.error != "another flush is running" else None
    if reason is None:
        try:
            post(ev, url)
            return Delivery(ev, "sent", flushed=first)
        except Unreachable as exc:
            reason = str(exc)
    try:
        path = spool_event(ev, spool)
    except OSError as exc:
        raise EmitError(f"could not send the event ({reason}) and could not spool it in "
                        f"{spool or spool_dir()}: {exc.strerror or exc}") from exc
    return Delivery(ev, "spooled", path=path, reason=reason, flushed=first)


def emit(event: dict) -> str:
    """Send ``event`` to the configured Prefect server now (no spool); returns its id.

    There is deliberately no temporary-server fallback: an event sent to a server that
    stops with this process would trigger nothing.
    """
    ev = complete(event)
    try:
        return post(ev)
    except Unreachable as exc:
        raise EmitError(f"could not send the event: {exc}") from exc


def emit_job_event(kind: str, job_dir: str | Path, *, job_id: str | None = None,
                   config_id: str | None = None, baselines: Sequence[str | Path] = (),
                   end_time: str | None = None) -> Delivery:
    """Build the event for a job that ended and deliver it (sent, or spooled)."""
    root = Path(job_dir).expanduser()
    if not root.is_dir():
        raise EmitError(f"{job_dir} is not a directory (expected the job's log directory)")
    event = job_event(kind, root, job_id=job_id, config_id=config_id, baselines=baselines,
                      end_time=end_time)
    return deliver(event)
