"""The deployments that make l4 automatic, and ``l4 serve``.

``diagnose-job/on-failure`` runs on every ``l4.training.job.failed`` event and
``learn-normal/on-success`` on every ``l4.training.job.succeeded`` event, with parameters
taken from the event's payload (``flows.events``).  :func:`serve` registers both with the
configured Prefect server and runs their flow runs in subprocesses of this process.

``deployments/prefect.yaml`` declares the same two deployments for ``prefect deploy`` (work
pool + worker instead of ``l4 serve``); a test keeps both declarations in step.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from flows.events import FAILED, RESOURCE_PREFIX, SUCCEEDED
from flows.reconcile import Reconciler

DIAGNOSE_DEPLOYMENT = "on-failure"
LEARN_DEPLOYMENT = "on-success"

# Single-expression templates keep the payload's JSON types (null stays None, lists stay
# lists); ``default`` covers events sent without the key.
DIAGNOSE_PARAMETERS = {
    "job": "{{ event.payload.job_dir }}",
    "job_id": "{{ event.payload.job_id | default(None) }}",
    "config_id": "{{ event.payload.config_id | default(None) }}",
    "baselines": "{{ event.payload.baselines | default([]) }}",
    "failure_key": "{{ event.payload.failure_key | default(None) }}",
}
LEARN_PARAMETERS = {
    "job": "{{ event.payload.job_dir }}",
    "job_id": "{{ event.payload.job_id | default(None) }}",
    "config_id": "{{ event.payload.config_id | default(None) }}",
}


def trigger_specs() -> dict[str, dict[str, Any]]:
    """Deployment name -> its event trigger, as plain data (also what prefect.yaml holds)."""

    def spec(name: str, event: str, params: dict) -> dict[str, Any]:
        return {
            "type": "event",
            "name": name,
            "enabled": True,
            "match": {"prefect.resource.id": f"{RESOURCE_PREFIX}*"},
            "expect": [event],
            "for_each": ["prefect.resource.id"],
            "posture": "Reactive",
            "threshold": 1,
            "within": 0,
            "parameters": dict(params),
        }

    return {
        DIAGNOSE_DEPLOYMENT: spec("l4: diagnose a failed training job", FAILED, DIAGNOSE_PARAMETERS),
        LEARN_DEPLOYMENT: spec("l4: learn from a succeeded training job", SUCCEEDED, LEARN_PARAMETERS),
    }


def build_deployments(*, use_kb: bool = True, match_root_causes: bool = True) -> list:
    """The two runner deployments, entry points by module path so that an installed l4
    serves from any working directory."""
    from prefect.deployments.runner import EntrypointType
    from prefect.events import DeploymentEventTrigger

    from flows.diagnose import diagnose_job
    from flows.learn import learn_normal

    specs = trigger_specs()

    def trigger(name: str) -> DeploymentEventTrigger:
        raw = {k: v for k, v in specs[name].items() if k != "type"}
        return DeploymentEventTrigger(**raw)

    diag = diagnose_job.to_deployment(
        name=DIAGNOSE_DEPLOYMENT,
        triggers=[trigger(DIAGNOSE_DEPLOYMENT)],
        parameters={"use_kb": use_kb, "store_html": use_kb,
                    "match_root_causes": match_root_causes},
        entrypoint_type=EntrypointType.MODULE_PATH,
        description="Diagnose a failed training job when l4.training.job.failed arrives.",
        tags=["l4"],
    )
    learn = learn_normal.to_deployment(
        name=LEARN_DEPLOYMENT,
        triggers=[trigger(LEARN_DEPLOYMENT)],
        entrypoint_type=EntrypointType.MODULE_PATH,
        description="Add a succeeded job to its configuration's normal pool when "
        "l4.training.job.succeeded arrives.",
        tags=["l4"],
    )
    return [diag, learn]


def serve(*, limit: int | None = None, poll_seconds: float = 1.0, use_kb: bool = True,
          match_root_causes: bool = True, on_ready: Callable[[], None] | None = None,
          say: Callable[[str], None] | None = None, warm: bool = True) -> None:
    """Register the deployments and run their flow runs until interrupted (Ctrl-C, SIGTERM).

    ``warm``: each flow run is forked from a process that imported Prefect and the engine
    once (:mod:`flows.servefork`) rather than spawned cold (``L4_SERVE_WARM=0``).  A
    :class:`~flows.reconcile.Reconciler` makes the runs that the server's triggers did
    not make (their action failed, or the event came before the triggers existed).

    Every automatic diagnosis also writes its HTML report next to the knowledge base
    (``reports/<diagnosis id>.html``) and links it from the flow run's artifacts.

    ``poll_seconds``: how often the runner asks the server for new runs; it bounds the
    event-to-start latency (Prefect's default is 10 s).  ``on_ready`` runs once the
    deployments and their triggers exist on the server and before the runner starts:
    ``l4 serve`` re-sends its spooled events there, so that they trigger diagnoses.

    A Prefect server that goes away (restart, upgrade, network) does not end ``l4 serve``:
    Prefect's runner gives up after a few failed polls, so this waits until the server
    answers again, hands the diagnoses that were in flight back to the crash handling
    (:func:`recover_interrupted`: retried, or in the inbox), and serves again.  ``say``
    prints one line per outage (default: stderr).
    """
    from prefect.runner import Runner

    say = say or (lambda msg: print(msg, file=sys.stderr, flush=True))
    deployments = build_deployments(use_kb=use_kb, match_root_causes=match_root_causes)
    first = True
    while True:
        if on_ready is not None or not first:
            ids = [d.apply() for d in deployments]
            if not first:
                n = recover_interrupted(ids[0])
                if n:
                    say(f"l4 serve: {n} diagnosis run(s) were interrupted by the outage; "
                        "they are retried (or listed in `l4 inbox`)")
            time.sleep(1.0)  # let the server's trigger service see the automations
            if on_ready is not None:
                on_ready()  # first start: re-send the spool; after an outage: again
        # pause_on_shutdown=False: pausing needs the server (it is away when the runner
        # stops after an outage), and a deployment left unpaused still turns the events
        # that arrive while no l4 serve runs into scheduled runs for the next one
        runner = Runner(limit=limit, query_seconds=poll_seconds, pause_on_shutdown=False)
        ids = [runner.add_deployment(d) for d in deployments]
        if warm:  # flow runs forked from a warm process, not spawned cold (flows.servefork)
            from flows.diagnose import diagnose_job
            from flows.learn import learn_normal
            from flows.servefork import install

            install(runner, dict(zip(ids, (diagnose_job, learn_normal), strict=True)))
        if first:
            _starting_message(deployments)
            # job events the server took but made no run for (its trigger's action failed,
            # or no l4 serve had registered the triggers yet) get their runs (flows.reconcile)
            reconciler = Reconciler({FAILED: (ids[0], DIAGNOSE_PARAMETERS),
                                     SUCCEEDED: (ids[1], LEARN_PARAMETERS)}, say)
            reconciler.start()
        error: BaseException | None = None
        watchdog = Watchdog(runner, ids[0], say)
        watchdog.start()
        try:
            asyncio.run(runner.start())
        except KeyboardInterrupt:
            reconciler.stop.set()
            return
        except Exception as exc:  # noqa: BLE001 - decided below: outage or a real error
            error = exc
        finally:
            watchdog.stop.set()
        if runner.stopping:  # asked to stop (SIGTERM, Ctrl-C)
            reconciler.stop.set()
            return
        why = server_problem()
        if why is None and error is not None and _lost_the_server(error):
            # the runner gave up polling during an outage, and the server was back by the
            # time we asked: still an outage, not a reason to stop serving
            why = f"the runner lost the server ({_leaf(error)})"
        if why is None:
            reconciler.stop.set()
            if error is not None:
                raise error
            return
        say(f"l4 serve: the Prefect server stopped answering ({why}); waiting for it to "
            "come back, then serving again")
        t0 = time.monotonic()
        wait_for_server()
        say(f"l4 serve: the Prefect server is back after {time.monotonic() - t0:.0f} s; "
            "serving again")
        first = False


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, each with its causes."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    out, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _lost_the_server(exc: BaseException) -> bool:
    """Whether the runner stopped because it could not reach the server (connection
    refused or reset, a websocket closed by a restart), not for a reason of its own."""
    import httpx

    for leaf in _leaves(exc):
        if isinstance(leaf, httpx.TransportError | ConnectionError | TimeoutError):
            return True
        # Prefect's service loops (the runner's poller among them) count only transport
        # errors and 5xx answers, and give up with this after enough of them in a row
        if isinstance(leaf, RuntimeError) and "exceeded error threshold" in str(leaf):
            return True
        if type(leaf).__module__.startswith("websockets") and "Connection" in type(leaf).__name__:
            return True
    return False


def _leaf(exc: BaseException) -> str:
    leaf = _leaves(exc)[-1] if _leaves(exc) else exc
    return f"{type(leaf).__name__}: {' '.join(str(leaf).split())[:120]}"


class Watchdog(threading.Thread):
    """While a runner serves: notice the server going away and coming back, then recover
    the runs that were in flight before the outage and that the runner no longer runs.

    Such a run's process ended while the server was away (its API calls ran out of
    retries) and the runner could not report it Crashed either, so the server shows it
    Running forever and no crash hook fires.  Outages long enough for that (about two
    minutes with Prefect's default client retries) but too short to stop the runner are
    caught here; longer ones by :func:`serve` itself.
    """

    def __init__(self, runner: Any, deployment_id: Any, say: Callable[[str], None], *,
                 every: float = 3.0, grace: float = 10.0):
        super().__init__(name="l4-serve-watchdog", daemon=True)
        self.runner, self.deployment_id, self.say = runner, deployment_id, say
        self.every, self.grace = every, grace
        self.stop = threading.Event()

    def live_runs(self) -> set | None:
        """Ids of the runs this runner is starting or running; None when unknown."""
        try:
            live = set(self.runner._process_manager.flow_run_ids())
            poller = getattr(self.runner, "_scheduled_run_poller", None)
            live |= set(getattr(poller, "_submitting_flow_run_ids", ()) or ())
        except Exception:  # noqa: BLE001 - a Prefect without these: recover nothing here
            return None
        return live

    def run(self) -> None:
        down_since = None
        while not self.stop.wait(self.every):
            if server_problem() is not None:
                down_since = down_since or datetime.now(UTC)
                continue
            if down_since is None:
                continue
            if self.stop.wait(self.grace):  # let the runner report what it still can
                return
            live = self.live_runs()
            if live is not None:
                try:
                    n = recover_interrupted(self.deployment_id, before=down_since, skip=live)
                except Exception as exc:  # noqa: BLE001 - the server went away again
                    self.say(f"l4 serve: could not check for interrupted runs ({exc})")
                    continue
                if n:
                    self.say(f"l4 serve: {n} diagnosis run(s) ended while the Prefect server "
                             "was away; they are retried (or listed in `l4 inbox`)")
            down_since = None


def _starting_message(deployments: list) -> None:
    try:
        from prefect.flows import _display_serve_start_message
    except ImportError:  # a Prefect without it: l4 serve printed its own line already
        return
    _display_serve_start_message(*deployments)


def server_problem(timeout: float = 5.0) -> str | None:
    """None when the configured Prefect server answers its health check, else why not."""
    import httpx
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        return "no PREFECT_API_URL"
    try:
        r = httpx.get(url.rstrip("/") + "/health", timeout=timeout)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if r.status_code == 200 else f"HTTP {r.status_code}"


def wait_for_server(step: float = 2.0) -> None:
    """Block until the server answers (Ctrl-C or SIGTERM end the wait, and l4 serve)."""
    while server_problem() is not None:
        time.sleep(step)


INTERRUPTED = "interrupted: the Prefect server went away while this run was in flight"


def recover_interrupted(deployment_id: Any, *, before: datetime | None = None,
                        skip: set | frozenset = frozenset()) -> int:
    """Runs of the diagnose deployment left Pending or Running by a runner that stopped
    (their processes ended with it): mark each Crashed and hand it to
    :func:`flows.recovery.retry_crashed`, which submits it again (a diagnosis that was
    already stored is then found by its failure key, not stored twice) or, with the
    retries used up, leaves a "diagnosis failed" entry in the inbox.  Returns how many.

    Called when this process's runner has stopped and before a new one starts, so no run
    of this ``l4 serve`` is in flight, or by the :class:`Watchdog` with ``skip`` (the runs
    the runner still runs) and ``before`` (only runs in that state since before the
    outage).  One ``l4 serve`` per server is assumed (a second one serving the same
    deployments would see its own runs retried).
    """
    from prefect import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Crashed

    from flows.recovery import retry_crashed

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])),
            flow_run_filter=FlowRunFilter(state=FlowRunFilterState(
                type=FlowRunFilterStateType(any_=[StateType.PENDING, StateType.RUNNING]))))
        runs = [r for r in runs if r.id not in skip and (
            before is None or (r.state and r.state.timestamp and r.state.timestamp < before))]
        for run in runs:
            state = Crashed(message=INTERRUPTED)
            client.set_flow_run_state(run.id, state, force=True)
            retry_crashed(None, run, state)
    return len(runs)
