"""The deployments that make l4 automatic, and ``l4 serve``.

``diagnose-job/on-failure`` runs on every ``l4.training.job.failed`` event and
``learn-normal/on-success`` on every ``l4.training.job.succeeded`` event, with parameters
taken from the event's payload (``flows.events``).  :func:`serve` registers both with the
configured Prefect server and runs their flow runs in subprocesses of this process.

``deployments/prefect.yaml`` declares the same two deployments for ``prefect deploy`` (work
pool + worker instead of ``l4 serve``); a test keeps both declarations in step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from flows.events import FAILED, RESOURCE_PREFIX, SUCCEEDED

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
          match_root_causes: bool = True, on_ready: Callable[[], None] | None = None) -> None:
    """Register the deployments and run their flow runs until interrupted (Ctrl-C).

    Every automatic diagnosis also writes its HTML report next to the knowledge base
    (``reports/<diagnosis id>.html``) and links it from the flow run's artifacts.

    ``poll_seconds``: how often the runner asks the server for new runs; it bounds the
    event-to-start latency (Prefect's default is 10 s).  ``on_ready`` runs once the
    deployments and their triggers exist on the server and before the runner starts:
    ``l4 serve`` re-sends its spooled events there, so that they trigger diagnoses.
    """
    from prefect import serve as prefect_serve

    deployments = build_deployments(use_kb=use_kb, match_root_causes=match_root_causes)
    if on_ready is not None:
        for d in deployments:
            d.apply()
        time.sleep(1.0)  # let the server's trigger service see the new automations
        on_ready()
    prefect_serve(*deployments, limit=limit, query_seconds=poll_seconds,
                  print_starting_message=True)
