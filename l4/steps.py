"""The analysis steps after parsing, written down once.

``l4.engine`` runs them as plain calls; the ``diagnose-job`` flow (``flows/``) runs the same
list as Prefect tasks, one task per step under the step's name.  Adding, removing or
reordering a step is an edit here, and both follow.

Each step names the values it needs and the one it gives; a run starts from ``failed``
(the parsed job) and ``reference`` (what healthy runs say: statistics, the jobs they came
from, whether a stored pool was used, the phase timeline).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from l4.crossjob import CrossJobResult, EventStat, filter_events
from l4.indicators import Indicator, select_events
from l4.merge import ParsedJob
from l4.phases import Timeline
from l4.report import build_report
from l4.spatial import NodeScore, rank_nodes
from l4.temporal import TemporalResult, analyze


class Healthy(Protocol):
    """What the analysis needs from the healthy reference (``Reference`` or the flow's
    merge result)."""

    stats: dict[int, EventStat] | None
    baseline_jobs: list[str]
    pool_used: bool
    timeline: Timeline | None


@dataclass
class Reference:
    stats: dict[int, EventStat] | None = None
    baseline_jobs: list[str] = field(default_factory=list)
    pool_used: bool = False
    timeline: Timeline | None = None


def cross_job(failed: ParsedJob, reference: Healthy) -> CrossJobResult:
    """What healthy runs cannot explain, per node and event (``l4.crossjob``)."""
    return filter_events(failed, reference.stats or None,
                         baseline_jobs=reference.baseline_jobs, pool_used=reference.pool_used)


def spatial(failed: ParsedJob, cross: CrossJobResult, reference: Healthy) -> list[NodeScore]:
    return rank_nodes(failed, cross, words=reference.timeline.words if reference.timeline else None)


def temporal(failed: ParsedJob, cross: CrossJobResult, ranked: list[NodeScore],
             reference: Healthy) -> TemporalResult:
    return analyze(failed, cross, ranked, reference.timeline)


def indicators(failed: ParsedJob, cross: CrossJobResult, ranked: list[NodeScore],
               reference: Healthy) -> list[Indicator]:
    return select_events(failed, cross, ranked, timeline=reference.timeline)


def report(failed: ParsedJob, cross: CrossJobResult, ranked: list[NodeScore],
           temporal: TemporalResult, events: list[Indicator]) -> dict:
    return build_report(failed, cross, ranked, temporal, events)


@dataclass(frozen=True)
class Step:
    name: str  # also the Prefect task's name
    run: Callable[..., Any]
    needs: tuple[str, ...]
    gives: str


ANALYSIS: tuple[Step, ...] = (
    Step("cross-job filter", cross_job, ("failed", "reference"), "cross"),
    Step("spatial", spatial, ("failed", "cross", "reference"), "ranked"),
    Step("temporal", temporal, ("failed", "cross", "ranked", "reference"), "temporal"),
    Step("indicators", indicators, ("failed", "cross", "ranked", "reference"), "events"),
    Step("report", report, ("failed", "cross", "ranked", "temporal", "events"), "report"),
)


def run_steps(values: dict[str, Any], steps: Sequence[Step] = ANALYSIS,
              call: Callable[[Step, list], Any] | None = None) -> dict[str, Any]:
    """Run ``steps`` in order over ``values`` (updated in place and returned).

    ``call(step, args)`` runs one step; by default a plain call (the flow passes one that
    submits the step's Prefect task)."""
    for step in steps:
        args = [values[k] for k in step.needs]
        values[step.gives] = call(step, args) if call else step.run(*args)
    return values
