"""The schedule of a job's periodic phases, read from the lines that report them.

Some frameworks announce an evaluation only when it ends ("validation loss at iteration
50"); the iterations those lines name give the schedule (every 25).  A job that stopped
right after an iteration where the schedule says it validates, without the report, was
validating.  The schedule is read from the failed job's own reports when it printed two
or more, else from healthy runs of the same configuration (``l4.phases.Timeline``): a job
that failed in its first evaluation printed no report at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from l4.mask import numbers_in
from l4.merge import ParsedJob
from l4.profiles import Profile


@dataclass(frozen=True)
class Schedule:
    """A periodic phase: ``stage`` reported every ``every`` iterations, up to ``last``."""

    stage: str
    every: int
    first: int
    last: int

    def due(self, done: int) -> bool:
        """Is the phase due right after iteration ``done`` (on the grid, within the run)?"""
        return self.every > 1 and done % self.every == 0 and self.first <= done


def schedules(job: ParsedJob, profile: Profile) -> list[Schedule]:
    """The periodic phases ``job`` reported at least twice, with their grids.

    The first and last report are enough to read a grid: of their numbers, the first pair
    that differs (the iteration; not a loss printed beside it) gives the spacing, the
    largest that both are multiples of (reports at 25 and 75: every 25).
    """
    out: list[Schedule] = []
    for stage, rx in profile.periodic:
        for c, template in enumerate(job.templates):
            if not rx.search(template):
                continue
            for i in np.nonzero(job.counts[:, c] >= 2)[0].tolist():
                if c not in job.examples[i] or c not in job.last_examples[i]:
                    continue
                a = numbers_in(job.examples[i][c][1])
                b = numbers_in(job.last_examples[i][c])
                pair = next(((x, y) for x, y in zip(a, b, strict=False)
                             if 0 < x < y and x == int(x) and y == int(y)), None)
                if pair is None or len(a) != len(b):
                    continue
                first, last = int(pair[0]), int(pair[1])
                # not refined by how many reports there were: every rank of a node may
                # print each one, and a grid read too fine calls a training step a phase
                every = math.gcd(first, last)
                if every > 1:
                    out.append(Schedule(stage, every, first, last))
    return out


def _report_columns(job: ParsedJob, profile: Profile, stage: str):
    """(rule, column) of every event of ``job`` that reports ``stage`` (by the profile's
    ``periodic`` rules)."""
    for st, rx in profile.periodic:
        if st != stage:
            continue
        for c, template in enumerate(job.templates):
            if rx.search(template):
                yield rx, c


def scheduled_phase(job: ParsedJob, profile: Profile, last_done: float,
                    healthy: list[Schedule] | tuple[Schedule, ...] = ()) -> str | None:
    """The periodic phase (evaluation, save) due right after iteration ``last_done``.

    By the job's own reports: due after the last one it printed.  By the healthy runs'
    schedule (``healthy``) when the job printed no report of that phase at all (it failed
    in the first one), or reported on that grid up to the last one due before: it kept the
    schedule.  A job that skipped a due report may have stopped for another reason (its
    clock, not its schedule, dates a slowdown).
    """
    if last_done is None or math.isnan(last_done) or last_done <= 0:
        return None
    done = int(last_done)
    for s in schedules(job, profile):
        if done > s.last and s.due(done):
            return s.stage
    for s in healthy:
        if not (s.due(done) and done <= s.last):
            continue
        said = report_numbers(job, profile, s.stage)
        # the job reported none (it failed in its first), or reported on the healthy grid
        # right up to the last one due before ``done``: it kept that schedule and this
        # report was due (one that skipped a due report stopped for another reason)
        if not said or (all(n % s.every == 0 for n in said) and max(said) == done - s.every):
            return s.stage
    return None


def report_numbers(job: ParsedJob, profile: Profile, stage: str) -> set[int]:
    """The iterations the job's reports of ``stage`` named (the first and last report
    per node and line): the first whole number from where the report's words begin, or
    the last before them when they are followed by measurements only."""
    out: set[int] = set()
    for rx, c in _report_columns(job, profile, stage):
        for i in np.nonzero(job.counts[:, c] > 0)[0].tolist():
            texts = [job.last_examples[i].get(c, "")]
            if c in job.examples[i]:
                texts.append(job.examples[i][c][1])
            for text in texts:
                m = rx.search(text)
                if m is None:
                    continue
                # the number the report's own words lead to, not its timestamp's; else
                # the one nearest before them ("step 244: train loss 1.43, val loss 1.48":
                # after the words only the losses)
                n = next((int(x) for x in numbers_in(text[m.start():])
                          if x == int(x) and x > 0), None)
                if n is None:
                    n = next((int(x) for x in reversed(numbers_in(text[:m.start()]))
                              if x == int(x) and x > 0), None)
                if n is not None:
                    out.add(n)
    return out
