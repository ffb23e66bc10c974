"""The step in progress when the culprit failed, when the counter is printed every few steps.

A job that prints its counter every 50 steps says the fault came after step 19250 and
before 19300; which step it was follows from time.  Steps take about the same time, so the
time from the last printed step to the failure, over the time one step takes, counts the
steps that went by: logged at 31590, 4.2 s a step, failed 19.9 s later: step 31595.

Three readings are needed and each has more than one source, none of them a framework's
wording:

- **when the culprit failed**: its failure line's time; where that line carries none (a
  traceback, NCCL's WARN lines) the next line of the node that does (the launcher or the
  watchdog reporting the exit, seconds later); for a node that went silent (lost power, a
  hung GPU), when the collective its peers waited on began, which their watchdogs state
  ("ran for 1800468 milliseconds", ``l4.clocks.collective_readings``);
- **when the last step was printed, and how long a step takes**: the counter lines' own
  times, on the culprit's node or, where only some nodes print the counter (rank 0 only),
  on a node that does; where they carry none, a timed line of the counting node that
  names a printed count (a checkpoint saved "from iteration 18999"), and the step
  durations the counter lines print;
- **on one clock**: hosts' clocks disagree by seconds, a step or more, so each node's
  times are moved by its offset from the job's clock (``l4.clocks.signed_offsets``).
"""

from __future__ import annotations

import math
import re

import numpy as np

from l4.clocks import collective_readings, signed_offsets
from l4.crossjob import CrossJobResult
from l4.iterations import WINDOW, Counter
from l4.merge import ParsedJob
from l4.onset import next_time

_NUMBER = re.compile(r"\d+")

#: a counter track needs this many timed lines before the failure to give a step's time
MIN_TIMED = 3


def at_failure(job: ParsedJob, cross: CrossJobResult, counter: Counter, r: int,
               point: tuple[int, int | None, float], current: float | None) -> float | None:
    """The step that was in progress at node ``r``'s failure ``point`` (``l4.onset.onset``),
    when the counter is logged every few steps (``current`` names its interval, as the job
    would print it); ``None`` where the clocks cannot tell."""
    if current is None or counter.step <= 1:
        return None
    offsets = np.nan_to_num(signed_offsets(job, cross), nan=0.0)
    t_f = failure_time(job, r, point, offsets)
    est = step_in_progress(counter, r, t_f, current, offsets)
    return est if est is not None else anchored_step(job, counter, r, t_f, current, offsets)


def step_in_progress(counter: Counter, r: int, t_f: float, current: float | None,
                     offsets: np.ndarray | None = None) -> float | None:
    """The step in progress at job-clock time ``t_f`` when node ``r`` failed, from the
    culprit's own timed counter lines or else another counting node's; ``offsets``: each
    node's clock less the job's (``l4.clocks.signed_offsets``), 0 when not given."""
    if current is None or counter.step <= 1 or math.isnan(t_f):
        return None
    for i in _timed_tracks(counter, r):
        off = float(offsets[i]) if offsets is not None else 0.0
        est = _extrapolate(counter, i, t_f, off, current)
        if est is not None:
            return est
    return None


def anchored_step(job: ParsedJob, counter: Counter, r: int, t_f: float, current: float | None,
                  offsets: np.ndarray) -> float | None:
    """The step in progress at job-clock time ``t_f`` where the counter lines carry no
    clock but state how long a step took, and a timed line of the same node names a
    count it had printed ("Successfully saved checkpoint from iteration 18999" at
    06:03:14): that count was done by then, and the steps since are the time since over
    a step's time.  ``None`` when no node has both, or the steps since would not land in
    the interval the job would print next (a duration that is not one step's)."""
    if current is None or counter.step <= 1 or math.isnan(t_f):
        return None
    for i in sorted(counter.printed, key=lambda i: i != r):
        est = _from_anchor(job, counter, i, t_f, float(offsets[i]), current)
        if est is not None:
            return est
    return None


def failure_time(job: ParsedJob, r: int, point: tuple[int, int | None, float],
                 offsets: np.ndarray) -> float:
    """When node ``r`` failed, on the job's clock (see the module docstring)."""
    _, line, t = point
    if line is None:
        # the log just ends: the node died or hung; its peers' watchdogs date the
        # collective they waited on, which began after the node's last line
        last = float(job.node_last_ts[r]) - float(offsets[r])
        began = hang_began(job, offsets)
        if not math.isnan(began) and (math.isnan(last) or began > last):
            return began
        return last
    if math.isnan(t):
        t = next_time(job, r, line)
    return t - float(offsets[r])


def hang_began(job: ParsedJob, offsets: np.ndarray) -> float:
    """When the collective that the nodes timed out on began, on the job's clock: the
    latest sequence number that two or more nodes' watchdogs name, the median of their
    readings; nan without such lines.  (The node that hung names none.)"""
    per = collective_readings(job)
    seen: dict[int, list[float]] = {}
    for i, d in enumerate(per):
        for seq, start in d.items():
            seen.setdefault(seq, []).append(start - float(offsets[i]))
    shared = [seq for seq, v in seen.items() if len(v) >= 2]
    if not shared:
        return math.nan
    return float(np.median(seen[max(shared)]))


def _timed_tracks(counter: Counter, r: int) -> list[int]:
    """Counting nodes whose counter lines carry times: the culprit's own first, then those
    with the most timed lines."""
    timed = {i: int((~np.isnan(ts) & ~np.isnan(num)).sum()) for i, (_, num, ts) in counter.tracks.items()}
    order = sorted((i for i, k in timed.items() if k >= MIN_TIMED and i != r), key=lambda i: -timed[i])
    return ([r] if timed.get(r, 0) >= MIN_TIMED else []) + order


def _from_anchor(job: ParsedJob, counter: Counter, i: int, t_f: float, offset: float,
                 current: float) -> float | None:
    lines, dur = counter.printed[i]
    _, num, ts = counter.tracks[i]
    if not np.isnan(ts).all() or (~np.isnan(dur)).sum() < MIN_TIMED:
        return None
    counted = ~np.isnan(num) & (lines > 0)
    anchor = None
    for c, text in job.last_examples[i].items():
        t, line = float(job.last_ts[i, c]) - offset, int(job.last_line[i, c])
        if math.isnan(t) or t > t_f or c in counter.cols or (anchor and line <= anchor[0]):
            continue
        before = num[counted & (lines < line)]
        if before.size and str(int(before[-1])) in _NUMBER.findall(text):
            anchor = (line, float(before[-1]), t)
    done = num[counted & (num < current)]
    if anchor is None or not done.size:
        return None
    line_a, n_a, t_a = anchor
    # the steps since the anchor took their mean time, summed: the mean of the durations
    # printed since (a sample of them), or of the last few before
    since = dur[counted & (lines > line_a) & ~np.isnan(dur)]
    d = since if since.size >= MIN_TIMED else dur[~np.isnan(dur)][-WINDOW:]
    per_step = float(np.mean(d))
    if per_step <= 0:
        return None
    last = float(done[-1])
    est = n_a + math.floor((t_f - t_a) / per_step) + 1
    if not last - counter.step < est <= last + counter.step + 1:
        return None
    return float(min(max(est, last + 1), last + counter.step))


def _extrapolate(counter: Counter, i: int, t_f: float, offset: float,
                 current: float) -> float | None:
    """Steps completed on node ``i``'s track by job-clock time ``t_f``, plus the one in
    progress, kept inside the interval the job would have printed next."""
    _, num, ts = counter.tracks[i]
    ts = ts - offset
    ok = ~np.isnan(num) & ~np.isnan(ts) & (ts <= t_f) & (num < current)
    n, t = num[ok], ts[ok]
    if n.size < MIN_TIMED:
        return None
    dn, dt = np.diff(n[-WINDOW - 1:]), np.diff(t[-WINDOW - 1:])
    good = (dn > 0) & (dt > 0)
    if not good.any():
        return None
    per_step = float(np.median(dt[good] / dn[good]))
    last = float(n[-1])
    est = last + math.floor((t_f - float(t[-1])) / per_step) + 1
    if est > last + counter.step + 1:
        # more steps than the job would have printed: the failure came later than a step
        # (it waited on something first), so the time says nothing of which step
        return None
    return float(min(max(est, last + 1), last + counter.step))
