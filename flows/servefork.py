"""``l4 serve``'s flow runs forked from a warm process instead of spawned cold.

Prefect's runner starts every flow run of a deployment in a new process that imports
Prefect, the engine, scikit-learn and SciPy, and compiles the root-cause indicator regexes,
before the diagnosis starts: on a small job that was most of the time from event to stored
diagnosis.  :func:`install` keeps what the runner does (one process per flow run, with its
own memory, its states, cancellation and crash reports) and changes where that process
comes from:

* the runner gets the in-memory flow of each deployment, so it runs flow runs with
  Prefect's ``run_flow_in_subprocess`` (as for ``flow.serve()``) instead of
  ``python -m prefect.engine``;
* that function's "spawn" context becomes a forkserver context whose server process has
  imported :mod:`flows.servewarm` (everything a diagnosis needs, warmed once, at
  ``l4 serve``'s start): each flow run is forked from it, warm.

Everything here is optional: on a Prefect whose runner lacks what this uses, :func:`install`
returns False and the runner spawns its processes as before (slower, never different).
"""

from __future__ import annotations

import multiprocessing
from typing import Any

#: modules the forkserver imports before forking flow runs
PRELOAD = ["flows.servewarm"]


class _ForkserverMultiprocessing:
    """Stands in for the ``multiprocessing`` module inside :mod:`prefect.flow_engine`:
    everything as usual, except that a "spawn" context is a forkserver one."""

    def __getattr__(self, name: str) -> Any:
        return getattr(multiprocessing, name)

    def get_context(self, method: str | None = None) -> Any:
        return multiprocessing.get_context("forkserver" if method == "spawn" else method)


def install(runner: Any, flows_by_deployment: dict[Any, Any]) -> bool:
    """Have ``runner`` fork its flow runs from a warm forkserver; True when it will.

    ``flows_by_deployment``: deployment id -> the flow object it runs.  Starts the
    forkserver now, so that its imports are paid at ``l4 serve``'s start, not by the first
    diagnosis."""
    try:
        import prefect.flow_engine as flow_engine
        import prefect.runner._starter_direct  # noqa: F401 - the starter that is used then

        registry = runner._deployment_registry
        register = registry.register_flow
        _ = flow_engine.run_flow_in_subprocess, flow_engine.multiprocessing
    except (ImportError, AttributeError):
        return False
    for deployment_id, flow in flows_by_deployment.items():
        register(deployment_id, flow)
    if not isinstance(flow_engine.multiprocessing, _ForkserverMultiprocessing):
        flow_engine.multiprocessing = _ForkserverMultiprocessing()
    from multiprocessing import forkserver

    multiprocessing.set_forkserver_preload(PRELOAD)
    forkserver.ensure_running()
    return True


def installed() -> bool:
    """Whether this process's flow runs are forked from the warm forkserver."""
    try:
        import prefect.flow_engine as flow_engine
    except ImportError:
        return False
    return isinstance(getattr(flow_engine, "multiprocessing", None), _ForkserverMultiprocessing)
