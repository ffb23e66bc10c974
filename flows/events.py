"""The events that start l4 automatically, and how to send one.

A training job that ends emits ``l4.training.job.failed`` or ``l4.training.job.succeeded``
with the location of its logs.  The deployments served by ``l4 serve`` are triggered by
these events (``flows.serve``); ``l4 emit``, ``deployments/slurm-epilog.sh`` and the
Kubernetes example all send exactly this shape::

    {"event": "l4.training.job.failed",
     "resource": {"prefect.resource.id": "l4.job.<job id>", "prefect.resource.name": "<job id>",
                  "l4.job.dir": "/shared/jobs/<job id>"},
     "payload": {"job_dir": "/shared/jobs/<job id>", "job_id": "<job id>",
                 "config_id": "<config id>" | null, "baselines": ["/shared/jobs/..."]}}

Every payload key is always present (null when unknown): the deployment triggers read
them by name.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

FAILED = "l4.training.job.failed"
SUCCEEDED = "l4.training.job.succeeded"
EVENTS = {"failed": FAILED, "succeeded": SUCCEEDED}
RESOURCE_PREFIX = "l4.job."


class EmitError(RuntimeError):
    """The event could not be sent (the message says why and what to do)."""


def _job_json(job_dir: Path) -> dict:
    try:
        meta = json.loads((job_dir / "job.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def job_event(kind: str, job_dir: str | Path, *, job_id: str | None = None,
              config_id: str | None = None, baselines: Sequence[str | Path] = ()) -> dict:
    """The event for a job that ended (``kind``: failed or succeeded).

    ``job_id``/``config_id`` default to the job's ``job.json`` (then the directory name),
    so an emitter that knows only the directory still sends a complete event.
    """
    if kind not in EVENTS:
        raise ValueError(f"event kind must be one of {', '.join(EVENTS)}, not {kind!r}")
    root = Path(job_dir).expanduser().absolute()
    meta = _job_json(root)
    jid = str(job_id or meta.get("job_id") or root.name)
    cfg = config_id or (str(meta["config_id"]) if meta.get("config_id") is not None else None)
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
        },
    }


def _api_url() -> str | None:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or None


def emit(event: dict) -> str:
    """Send ``event`` to the configured Prefect server (or Cloud workspace); returns its id.

    There is deliberately no temporary-server fallback: an event sent to a server that
    stops with this process would trigger nothing.
    """
    import asyncio

    url = _api_url()
    if not url:
        raise EmitError(
            "no Prefect server configured: set PREFECT_API_URL (e.g. run `prefect server start` "
            "and `prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api`) where `l4 serve` "
            "is connected too"
        )
    from prefect.events import Event
    from prefect.events.clients import get_events_client

    ev = Event(
        id=uuid.uuid4(),
        occurred=datetime.now(UTC),
        event=event["event"],
        resource=event["resource"],
        payload=event.get("payload", {}),
    )

    async def send() -> None:
        async with get_events_client(reconnection_attempts=2) as client:
            await client.emit(ev)

    try:
        asyncio.run(send())
    except Exception as exc:  # connection refused, DNS, auth: one clear line for the user
        raise EmitError(f"could not send the event to {url}: {type(exc).__name__}: {exc}") from exc
    return str(ev.id)


def emit_job_event(kind: str, job_dir: str | Path, *, job_id: str | None = None,
                   config_id: str | None = None, baselines: Sequence[str | Path] = ()) -> dict:
    """Build and send the event for a job that ended; returns the event sent (with ``id``)."""
    root = Path(job_dir).expanduser()
    if not root.is_dir():
        raise EmitError(f"{job_dir} is not a directory (expected the job's log directory)")
    event = job_event(kind, root, job_id=job_id, config_id=config_id, baselines=baselines)
    event["id"] = emit(event)
    return event
