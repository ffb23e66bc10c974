"""Every job event the server took gets its flow run, even when no trigger made one.

``l4 serve`` relies on the server's automations to turn an ``l4.training.job.failed``
event into a flow run.  That can fail without anyone being told:

- the server's own ``run-deployment`` action gets an error from the server's API (a busy
  SQLite server answers it 503 under a storm of failures) and Prefect does not retry it;
- the event arrived before any ``l4 serve`` had registered the deployments and their
  triggers (a new cluster, a server restored from a backup).

Either way the event is stored on the server and no diagnosis follows.  The
:class:`Reconciler` thread of ``l4 serve`` reads the recent job events back together with
the outcomes the server records for its automations' actions
(``prefect.automation.action.executed`` / ``.failed``, which name the triggering event).
A job event needs a run when its action failed, or when no action ran for it within
:func:`grace` of its arrival, and no run of the deployment has its failure key (the job
directory where an emitter sent none).  A storm makes the trigger fall a minute or more
behind, which is why an event without an outcome is given that long.

A run made twice is harmless: the diagnosis flow finds a failure it already stored by its
key (``l4.idempotency``) and the normal pool replaces a job's rows.

The matching is pure functions over plain data (:func:`render`, :func:`run_key`,
:func:`outcomes`, :func:`missing`); only :func:`reconcile` talks to the server.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

# {{ event.payload.KEY }} or {{ event.payload.KEY | default(VALUE) }}: the only templates
# flows.serve declares; anything else is not rendered here (the run is left to Prefect)
_TEMPLATE = re.compile(
    r"^\{\{\s*event\.payload\.(\w+)\s*(?:\|\s*default\((None|\[\]|'[^']*'|\"[^\"]*\")\)\s*)?\}\}$")
_DEFAULTS = {"None": None, "[]": []}


def render(templates: Mapping[str, str], payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The parameters a trigger's ``run-deployment`` action would pass for this payload,
    or None when a template is not one this module can render."""
    out: dict[str, Any] = {}
    for name, template in templates.items():
        m = _TEMPLATE.match(template.strip())
        if m is None:
            return None
        key, default = m.group(1), m.group(2)
        if key in payload:
            out[name] = payload[key]
        elif default is None:  # no default: Jinja renders a missing key as ""
            out[name] = ""
        else:
            out[name] = _DEFAULTS.get(default, default[1:-1])
    return out


def run_key(parameters: Mapping[str, Any]) -> str | None:
    """What makes two runs the same work: the failure key, else the job directory and id."""
    key = parameters.get("failure_key")
    if isinstance(key, str) and key:
        return key
    job = parameters.get("job")
    if not isinstance(job, str) or not job:
        return None
    return f"job:{parameters.get('job_id') or ''}@{job}"


@dataclass(frozen=True)
class JobEvent:
    """An event as read back from the server (``related``: (resource id, role) pairs)."""

    id: str
    name: str
    occurred: datetime
    payload: Mapping[str, Any]
    received: datetime
    related: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class MissingRun:
    """A flow run that should exist for an event and does not."""

    deployment_id: Any
    event_id: str
    parameters: dict[str, Any]
    key: str


EXECUTED = "prefect.automation.action.executed"
FAILED_ACTION = "prefect.automation.action.failed"


def outcomes(action_events: Iterable[JobEvent]) -> dict[str, set[str]]:
    """Triggering event id -> what became of the actions it triggered (executed, failed)."""
    out: dict[str, set[str]] = {}
    for ev in action_events:
        state = {EXECUTED: "executed", FAILED_ACTION: "failed"}.get(ev.name)
        if state is None:
            continue
        for rid, role in ev.related:
            if role == "triggering-event" and rid.startswith("prefect.event."):
                out.setdefault(rid.removeprefix("prefect.event."), set()).add(state)
    return out


def missing(events: Iterable[JobEvent], existing: Mapping[Any, set[str]],
            specs: Mapping[str, tuple[Any, Mapping[str, str]]], *,
            done: Mapping[str, set[str]], settled_before: datetime) -> list[MissingRun]:
    """The runs to create (``existing``: deployment id -> keys of its runs; ``done``:
    :func:`outcomes`): one per event whose action failed, or that the server received
    before ``settled_before`` with no action executed for it, when its key has no run of
    its deployment yet; oldest event first, each key once."""
    seen = {dep: set(keys) for dep, keys in existing.items()}
    out = []
    for ev in sorted(events, key=lambda e: (e.occurred, e.id)):
        if ev.name not in specs:
            continue
        states = done.get(ev.id, set())
        if "executed" in states or ("failed" not in states and ev.received > settled_before):
            continue  # its run was made, or the trigger may still make it
        dep, templates = specs[ev.name]
        params = render(templates, ev.payload)
        key = run_key(params) if params is not None else None
        if key is None or key in seen.setdefault(dep, set()):
            continue
        seen[dep].add(key)
        out.append(MissingRun(dep, ev.id, params, key))
    return out


def _seconds(name: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(name, default)))
    except ValueError:
        return default


def lookback() -> timedelta:
    """How far back (by when they occurred) ``l4 serve`` looks for job events without
    runs: when it starts, and every :data:`FULL_EVERY` passes (``L4_RECONCILE_LOOKBACK``
    seconds, default a day).  The passes between look at the last hour only."""
    return timedelta(seconds=_seconds("L4_RECONCILE_LOOKBACK", 86400.0))


def grace() -> timedelta:
    """How long after the server received a job event with no action outcome its run is
    made: the trigger normally acts within a second or two, but was 80 s behind in a
    storm of 50 failures on a SQLite server (``L4_RECONCILE_GRACE`` seconds, default
    300).  An event whose action failed is not waited for."""
    return timedelta(seconds=_seconds("L4_RECONCILE_GRACE", 300.0))


WINDOW = timedelta(hours=1)
FULL_EVERY = 60


def _read_events(client: Any, names: list[str], since: datetime, until: datetime) -> list[JobEvent]:
    from prefect.events.filters import EventFilter, EventNameFilter, EventOccurredFilter

    page = client.read_events(EventFilter(occurred=EventOccurredFilter(since=since, until=until),
                                          event=EventNameFilter(name=names)), limit=50)
    out = []
    while True:
        out += [JobEvent(str(e.id), e.event, e.occurred, dict(e.payload or {}),
                         getattr(e, "received", None) or e.occurred,
                         tuple((r.id, r.role or "") for r in e.related)) for e in page.events]
        if not page.next_page:
            return out
        page = client.read_events_page(page.next_page)


def _run_keys(client: Any, deployment_id: Any, since: datetime) -> set[str]:
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterExpectedStartTime,
    )

    keys: set[str] = set()
    offset = 0
    while True:
        runs = client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])),
            flow_run_filter=FlowRunFilter(
                expected_start_time=FlowRunFilterExpectedStartTime(after_=since)),
            limit=200, offset=offset)
        keys |= {k for r in runs if (k := run_key(r.parameters or {}))}
        if len(runs) < 200:
            return keys
        offset += len(runs)


def reconcile(specs: Mapping[str, tuple[Any, Mapping[str, str]]], *, since: datetime,
              settled_before: datetime) -> list[MissingRun]:
    """Create the runs missing for the job events that occurred since ``since`` (see
    :func:`missing`); returns them.

    Runs are looked up from a minute before ``since`` (an emitter's clock may run ahead of
    the server's); a run exists for an event only after the event, so that is enough.
    """
    from prefect import get_client

    with get_client(sync_client=True) as client:
        now = datetime.now(UTC)
        events = _read_events(client, sorted(specs), since, now)
        if not events:
            return []
        done = outcomes(_read_events(client, [EXECUTED, FAILED_ACTION],
                                     since - timedelta(minutes=1), now))
        runs_since = since - timedelta(minutes=1)
        existing = {dep: _run_keys(client, dep, runs_since) for dep, _ in specs.values()}
        todo = missing(events, existing, specs, done=done, settled_before=settled_before)
        for run in todo:
            client.create_flow_run_from_deployment(
                run.deployment_id, parameters=run.parameters,
                idempotency_key=f"l4 reconcile: event {run.event_id}", tags=["l4-reconciled"])
    return todo


class Reconciler(threading.Thread):
    """While ``l4 serve`` serves: every ``every`` seconds, make the runs missing for the
    job events whose action failed or that got none within :func:`grace`.

    The first pass, and every :data:`FULL_EVERY`-th, looks :func:`lookback` back; the
    others at the last hour (a spooled event re-sent late can have occurred long before
    it was received).  A pass that fails (the server is away) is simply repeated.
    """

    def __init__(self, specs: Mapping[str, tuple[Any, Mapping[str, str]]],
                 say: Callable[[str], None], *, every: float = 10.0):
        super().__init__(name="l4-serve-reconciler", daemon=True)
        self.specs, self.say, self.every = specs, say, every
        self.passes = 0
        self.stop = threading.Event()
        self.made: list[MissingRun] = []

    def once(self) -> list[MissingRun]:
        now = datetime.now(UTC)
        reach = lookback() if self.passes % FULL_EVERY == 0 else min(WINDOW, lookback())
        todo = reconcile(self.specs, since=now - reach, settled_before=now - grace())
        self.passes += 1
        return todo

    def run(self) -> None:
        while True:
            try:
                todo = self.once()
            except Exception as exc:  # noqa: BLE001 - the server away or busy: next pass
                todo = []
                if type(exc).__name__ not in ("ConnectError", "ReadTimeout", "RemoteProtocolError"):
                    self.say(f"l4 serve: could not check job events for missing runs "
                             f"({type(exc).__name__}: {' '.join(str(exc).split())[:160]})")
            if todo:
                self.made += todo
                self.say(f"l4 serve: {len(todo)} job event(s) had no flow run (the server's "
                         "trigger did not make one); made them")
            if self.stop.wait(self.every):
                return
