"""What happens to a served diagnosis that does not finish: no failure goes undiagnosed.

* A run whose process is killed (OOM killer, node reboot, ``kill -9``) is marked Crashed
  by the ``l4 serve`` runner, which then calls :func:`retry_crashed` in its own process:
  the same parameters are submitted again as a new run of the same deployment, up to
  ``L4_CRASH_RETRIES`` times (default 2).
* A run that still does not finish (crashed every time, or failed with an error, e.g. the
  logs vanished) leaves a pending entry in the knowledge base (:func:`record_failure`), so
  the SRE sees it in ``l4 inbox`` with the reason instead of finding nothing.

Only deployment runs are handled: an interactive ``l4 diagnose`` reports its own errors.
The entry carries the event's failure key, so a later successful diagnosis of the same
failure replaces it instead of adding a second one.
"""

from __future__ import annotations

import os
from typing import Any

ATTEMPT_PARAM = "attempt"


def crash_retries() -> int:
    try:
        return max(0, int(os.environ.get("L4_CRASH_RETRIES", "2")))
    except ValueError:
        return 2


def failure_report(params: dict[str, Any], reason: str, attempts: int) -> dict:
    """A stand-in report for a failure whose diagnosis did not finish (shown by the inbox)."""
    from pathlib import Path

    from l4.ingest import failure_key

    job = str(params.get("job") or "")
    key = params.get("failure_key")
    key = key if key and str(key) not in ("None", "null") else None
    jid = params.get("job_id")
    jid = jid if jid and str(jid) not in ("None", "null") else (Path(job).name or None)
    return {
        "job_id": jid,
        "job_dir": job,
        "stage": "diagnosis failed",
        "nodes": [],
        "iterations": [],
        "events": [],
        "root_causes": [],
        "root_causes_status": "not diagnosed",
        "diagnosis_failed": {"reason": reason, "attempts": attempts},
        "warnings": [f"the diagnosis did not finish after {attempts} attempt(s): {reason}; "
                     f"run `l4 diagnose {job}` by hand"],
        "failure_key": str(key) if key else (failure_key(job) if job else None),
        # never equal to a real fingerprint: a later delivery diagnoses again
        "logs_fingerprint": "diagnosis-failed",
    }


def record_failure(params: dict[str, Any], reason: str, attempts: int) -> str | None:
    from l4.kbstore import record_diagnosis

    kb = params.get("kb")
    kb = kb if kb and str(kb) not in ("None", "null") else None
    return record_diagnosis(failure_report(params, reason, attempts), kb=kb)


def _attempt(params: dict[str, Any]) -> int:
    try:
        return max(1, int(params.get(ATTEMPT_PARAM) or 1))
    except (TypeError, ValueError):
        return 1


def retry_crashed(flow: Any, flow_run: Any, state: Any) -> None:
    """on_crashed hook (runs in the ``l4 serve`` process): submit the run again, or record
    the failure once the retries are used up."""
    if getattr(flow_run, "deployment_id", None) is None:
        return
    params = dict(flow_run.parameters or {})
    attempt = _attempt(params)
    reason = f"crashed ({getattr(state, 'message', None) or 'process died'})"
    if attempt <= crash_retries():
        from prefect import get_client

        with get_client(sync_client=True) as client:
            client.create_flow_run_from_deployment(
                flow_run.deployment_id, parameters={**params, ATTEMPT_PARAM: attempt + 1},
                tags=["l4", "l4-retry"])
        return
    if params.get("use_kb", True) is not False:
        record_failure(params, reason, attempt)


def record_failed(flow: Any, flow_run: Any, state: Any) -> None:
    """on_failure hook (runs in the flow-run process): an error that survived the task
    retries leaves a pending entry for the SRE."""
    if getattr(flow_run, "deployment_id", None) is None:
        return
    params = dict(flow_run.parameters or {})
    if params.get("use_kb", True) is False:
        return
    record_failure(params, f"failed ({getattr(state, 'message', None) or 'error'})",
                   _attempt(params))
