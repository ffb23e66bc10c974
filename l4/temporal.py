"""Temporal comparison: the stage the job failed in and the iterations where it went wrong.

This module only puts the questions in order; each has its own module with one entry point:
the failure point (``l4.onset``), the stage (``l4.stage``), the iteration counter and the
suspicious iterations (``l4.iterations``), and what healthy runs of the same configuration
printed, in which order (``l4.phases``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from l4.crossjob import CrossJobResult
from l4.iterations import (
    find_counter,
    grid_end,
    iteration_at,
    last_count_time,
    suspicious_iterations,
)
from l4.merge import ParsedJob
from l4.onset import onset, worked_past
from l4.phases import Timeline, announced_start, first_step, paced_steps
from l4.profiles import choose_profile
from l4.seqstep import steps_at_failure
from l4.spatial import NodeScore
from l4.stage import LOOP, event_stages, failure_stage
from l4.stepclock import at_failure
from l4.unnumbered import densify, report_stride

#: the estimated step in progress ranks right after the interval the job would print
#: (5.0), before a slow spell that did not last (4.5) and the neighbouring intervals
EXACT_SCORE = 4.9
#: where neither clocks nor collectives date the failure, every step after the one just
#: printed is as likely as the next: the interval's end is listed first (what the job would
#: print), then the middles of the two halves of the steps it leaves (``spread_steps``),
#: before the step just printed (0.6) and the next interval (0.5)
SPREAD_SCORES = (0.62, 0.61)
#: ... for intervals long enough that the end leaves steps uncovered
SPREAD_MIN_STEP = 4


def spread_steps(end: float, step: float) -> tuple[int, int]:
    """Two steps that, with the interval's ``end`` listed before them, leave the fewest steps
    of the interval more than one away from a listed one.

    A counter printed every ``step`` steps says only that the failure came after the step
    just printed (``end - step``) and by ``end``; each step in between is as likely (the
    step just printed had completed: frameworks print a step once it is done).  ``end``
    and its neighbour are covered by the first answer; the others, ``end - step + 1`` to
    ``end - 2``, are split in two halves and each half's middle is listed, so a top-3 with
    a step's tolerance covers 8 of 10 steps (the interval's two ends and its middle
    covered 6).
    """
    first, last = end - step + 1, end - 2
    width = last - first
    return int(round(first + width / 4)), int(round(first + 3 * width / 4))


#: the end of the interval an unnumbered report line (every k steps) would name the
#: failure's step in: after the step itself and the signals that date the fault, before
#: the hedges around the step (0.6, 0.5)
REPORT_SCORE = 0.65

#: a job that died in training before printing a count: the first count healthy runs of
#: its configuration printed (``l4.phases.first_step``)
FIRST_STEP_SCORE = 1.0

#: the last completed step of a failure in a validation or a save: just below the
#: interval in progress (5.0 in ``l4.iterations.suspicious_iterations``), above the slow
#: and unusual steps (at most 4.5 unless a slowdown or an alarming streak began there)
PHASE_DONE_SCORE = 4.9

#: a job that numbered too few steps to count them: the step its count of a line healthy
#: runs printed every few steps reaches (``l4.phases.paced_steps``)
PACED_SCORE = 1.0


@dataclass
class TemporalResult:
    stage: str
    profile: str
    onset_node: str | None
    onset_line: int | None
    #: the file the onset line is in (a node's stream can read two: ``l4.gather``)
    onset_file: str | None = None
    #: event ids the onset node printed and then worked past (``l4.onset.worked_past``)
    worked_past: list[int] = field(default_factory=list)
    iterations: list[tuple[int, float]] = field(default_factory=list)
    marker_template: str | None = None
    step: float | None = None
    notes: list[str] = field(default_factory=list)


def _paced_iterations(stage: str, last: float, k: float) -> list[tuple[int, float]]:
    """The iterations to list for a job whose last report was of step ``last``, one every
    ``k`` steps: a save or an evaluation runs after the step it reports (the framework
    reports, then evaluates and saves), a failure in training is in the next interval,
    named as the job would have reported it."""
    nxt = int(last + k)
    if stage in ("checkpointing", "evaluation"):
        order = [int(last), nxt]
    else:
        order = [nxt, *spread_steps(nxt, k)] if k >= SPREAD_MIN_STEP else [nxt, int(last)]
    out: list[tuple[int, float]] = []
    for it in order:
        if all(it != o for o, _ in out):
            out.append((it, PACED_SCORE - 0.01 * len(out)))
    return out


def analyze(job: ParsedJob, cross: CrossJobResult, ranked: list[NodeScore],
            timeline: Timeline | None = None) -> TemporalResult:
    """Stage and suspicious iterations of a failed job (see module docstring).

    ``timeline``: what healthy runs of the same configuration printed, in which order
    (``l4.phases.learn_timeline``); without one, the profile's rules decide alone.
    """
    profile = choose_profile(job.templates, job.framework)
    stages = event_stages(job, profile)
    if not ranked:
        return TemporalResult("unknown", profile.name, None, None)
    row = {n: i for i, n in enumerate(job.nodes)}
    r = row[ranked[0].node]
    counter = find_counter(job, profile, stages, timeline.counters if timeline else (),
                           timeline.startup_ids() if timeline else ())
    finer = densify(job, counter, stages, cross.anomalous)
    if finer is not None:
        # a line printed every few steps without a number, counted from the numbered
        # lines around it (a save every 120 steps, a loss line every 10)
        counter = finer
    if counter is not None:
        # the line that counts training steps is a training line, whatever its wording
        for c in counter.cols:
            if stages[c] is None:
                stages[c] = "training"
    # an evaluation's or a save's lines, by the profile's words or the healthy runs' order:
    # the step after them took their time too (``l4.iterations.after_other_work``)
    work = {c for c, st in enumerate(stages) if st in ("evaluation", "checkpointing")}
    if timeline is not None:
        stages = timeline.relabel(job, stages, counter)
        work |= {c for c, st in enumerate(stages) if st in ("evaluation", "checkpointing")}
    point = onset(job, cross, r)
    if counter is not None and (point[1] is None or point[0] >= len(job.seqs[r]) - 1):
        # a node whose log just ends (silent, or cut mid-line) was alive while its peers
        # still counted steps: collectives hold every rank in step, so the job's last
        # count dates its end better than its own last line (a worker that prints
        # nothing while training, whose last words were start-up warnings)
        counted = last_count_time(counter)
        if not math.isnan(point[2]) and counted > point[2]:
            point = (point[0], point[1], counted)
    current = iteration_at(job, counter, r, point, cross) if counter else None
    stage = failure_stage(job, cross, profile, stages, r, point, counter, current, timeline)
    where = job.locate(r, point[0], point[1]) if point[1] is not None else (None, None)
    result = TemporalResult(stage, profile.name, job.nodes[r], where[1], where[0],
                            worked_past=worked_past(job, cross, r))
    if counter is None:
        result.notes.append("no iteration counter found")
        if stage == "training" and timeline is not None:
            # died in training before printing a count: in the first step the healthy runs
            # of the configuration printed (a resumed run's first step is its checkpoint's)
            firsts = first_step(timeline, job)
            steps = [int(v) for v in firsts[:3]]
            start = announced_start(job, r, point[0]) if firsts else None
            if start is not None and start > max(firsts):
                # a resumed run: the step it announced starting at, and where its healthy
                # runs' reporting grid (they began at 1 and first reported at F) puts it
                grid = int(min(firsts))
                steps = [start]
                if 1 < grid < start / 10 and start % grid:
                    steps.append(int(math.ceil(start / grid) * grid))
            elif start is not None and start not in steps:
                steps.append(start)  # the step itself, inside the first reported interval
            result.iterations = [(v, FIRST_STEP_SCORE - 0.01 * k) for k, v in enumerate(steps)]
            if firsts:
                result.notes.append("died before its first step report: the first step healthy "
                                    "runs of this configuration reported (or the step it "
                                    "announced starting at, past it) is listed")
        if not result.iterations and stage in LOOP and timeline is not None:
            paced = paced_steps(timeline, job)
            if paced is not None:
                result.iterations = _paced_iterations(stage, *paced)
                result.notes.append("no step counter: steps counted by a line healthy runs of "
                                    "this configuration printed every few steps")
        return result
    result.marker_template = job.templates[counter.marker]
    result.step = counter.step
    if stage in LOOP or stage == "finalization":  # a start-up failure has no iteration
        focus = [row[s.node] for s in ranked[:3]] + list(counter.tracks)[:3]
        scores = suspicious_iterations(job, cross, counter, focus,
                                       current if stage in LOOP else None, sorted(work))
        if stage == "finalization":
            # after the loop: the last iteration the job completed is the one it failed
            # after (a final save of step 280's weights)
            last = max(counter.last_counts().values(), default=math.nan)
            if not math.isnan(last):
                scores[int(last)] = max(scores.get(int(last), 0.0), PHASE_DONE_SCORE)
        if stage in ("evaluation", "checkpointing") and current is not None:
            # a validation or a save runs between steps: after the last completed one,
            # which names it as well as the interval in progress does (a job's own "saving
            # checkpoint at iteration 360"); it comes right after the interval
            done = int(current - counter.step)
            scores[done] = max(scores.get(done, 0.0), PHASE_DONE_SCORE)
        if stage == "training":
            # the step itself, next to the interval the job would have printed it in (an
            # evaluation or save runs between steps: the time since says nothing of steps)
            exact = at_failure(job, cross, counter, r, point, current)
            # where the clocks cannot tell, the collective the ranks were in counts steps
            found = [int(exact)] if exact is not None else steps_at_failure(
                job, cross, current, counter.step)
            for it in found:
                scores.setdefault(it, EXACT_SCORE)
            # a report line every k steps beside a counter of every step (a loss line
            # every 20 steps under a progress bar) names the failure by its interval too
            k = report_stride(job, counter, stages, cross.anomalous)
            at = found[0] if found else current
            if k and at is not None:
                scores.setdefault(int(math.ceil(at / k) * k), REPORT_SCORE)
            end = grid_end(counter, at) if at is not None else None
            if end is not None:  # a step printed off the job's own reporting grid
                scores.setdefault(end, REPORT_SCORE)
            if not found and current is not None and counter.step >= SPREAD_MIN_STEP:
                # nothing tells which step of the interval it was
                for it, sc in zip(spread_steps(current, counter.step), SPREAD_SCORES, strict=True):
                    scores.setdefault(it, sc)
        result.iterations = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
    return result
