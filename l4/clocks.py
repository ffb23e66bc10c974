"""Clocks: how far each node's clock is off the job's, read from lines printed in step.

Hosts' clocks disagree, by milliseconds on a well-run cluster and by tens of seconds on a
badly run one.  "Who stopped first" compares when nodes' logs ended, so a node whose clock
runs behind seems to stop first.  Lines that every node prints at one moment of the job
(start-up barriers, the process group coming up, a save every rank joins) show the offset:
a node that printed each of them 25 s before the others' median did has a clock 25 s
behind.  Step counters are the best such lines: in synchronous training every node
finishes step N together (its collectives wait for the slowest), so each step number
that most nodes printed is one more reading of every clock, whatever the line's wording.
Only lines printed before anything went wrong count: the failure itself reaches nodes at
different times, and that difference is the evidence, not the clock.  One failure line
reads a time from before it: c10d's watchdog says when it gave up on collective number N
and for how long it had run ("WorkNCCL(SeqNum=3506, ...) ran for 1800266 milliseconds"),
so it dates the collective's start, which every rank that waited entered together.
"""

from __future__ import annotations

import re

import numpy as np

from l4.crossjob import CrossJobResult
from l4.merge import ParsedJob

#: offsets smaller than this are reading noise (a barrier releases nodes a little apart)
MIN_OFFSET_S = 1.0
#: a line must be printed by this share of the nodes to show how their clocks stand
SHARED = 0.8
#: and there must be this many such lines, whose readings of one node's offset agree
MIN_LINES = 2
#: step numbers read per counter (the last ones most nodes printed): enough for a median
STEP_READINGS = 32


def clock_offsets(job: ParsedJob, cross: CrossJobResult) -> np.ndarray:
    """Per node: seconds its clock is behind the job's median clock, as a negative number
    (0 where unknown, below ``MIN_OFFSET_S``, or ahead).

    Only a clock behind is read: it makes a node seem to stop first, and correcting it
    takes that false lead away.  A node whose start-up lines came late may have started
    late rather than have a clock ahead; correcting it would lend it a lead it never had.
    """
    off = signed_offsets(job, cross)
    return np.where(~np.isnan(off) & (off <= -MIN_OFFSET_S), off, 0.0)


def signed_offsets(job: ParsedJob, cross: CrossJobResult) -> np.ndarray:
    """Per node: seconds its clock is off the job's median clock (behind < 0, ahead > 0;
    nan where its shared lines cannot tell).  Subtract it from a node's times to put them
    on the job's clock: that is how one node's failure is placed among another node's
    step lines.

    Each shared line (printed by most nodes, nothing unusual about it) gives every node
    that printed it the difference between its first time and the median first time; a
    node's offset is the median of its differences over those lines.
    """
    n = job.n_nodes
    out = np.full(n, np.nan)
    if n < 3:
        return out
    first = job.first_ts
    printed = ~np.isnan(first) & (job.counts > 0)
    routine = ~cross.anomalous.any(axis=0)
    cols = np.nonzero(routine & (printed.sum(axis=0) >= max(3, SHARED * n)))[0]
    sub = np.hstack([first[:, cols], step_times(job), collective_starts(job),
                     broadcast_times(job)])
    if sub.shape[1] == 0:
        return out
    # a job that failed at start-up shares one line at most (the launcher's banner): a node
    # that printed it 20 s early and stopped 20 s early ran as long as everyone, whether
    # its clock is behind or it started early, so that one line is enough
    need = MIN_LINES if sub.shape[1] >= MIN_LINES else 1
    ref = np.nanmedian(sub, axis=0)  # every column was printed by most nodes
    diff = sub - ref[None, :]
    for i in range(n):
        d = diff[i][~np.isnan(diff[i])]
        if d.size < need:
            continue
        off = float(np.median(d))
        # a clock that is off moves every line by as much; lines that disagree about it
        # (a node that merely loaded its shards later) say nothing about its clock
        if float(np.median(np.abs(d - off))) <= max(MIN_OFFSET_S, 0.2 * abs(off)):
            out[i] = off
    return out


#: a line the scheduler makes every node print at one moment, even after a failure: Slurm
#: cancels a step or job on all its nodes at once, and each node's slurmstepd states when
#: ("*** STEP 6439828.0 ON host CANCELLED AT 2024-07-28T13:59:07 ***")
_BROADCAST = re.compile(r"\*\*\* (?:STEP|JOB) \S+ ON \S+ CANCELLED AT ")


def broadcast_times(job: ParsedJob) -> np.ndarray:
    """(nodes, readings): when each node says the scheduler's cancel reached it, for each
    such line most nodes printed (nan where a node did not: a node that had lost power).
    The cancel follows the failure, but it reaches every node together, so unlike the
    failure's echoes it reads the clocks, not the propagation."""
    n = job.n_nodes
    cols = [c for c, t in enumerate(job.templates) if "CANCELLED AT" in t and _BROADCAST.search(t)]
    cols = [c for c in cols if int((~np.isnan(job.first_ts[:, c])).sum()) >= max(3, SHARED * n)]
    return job.first_ts[:, cols] if cols else np.zeros((n, 0))


def step_times(job: ParsedJob) -> np.ndarray:
    """(nodes, readings): when each node printed each of the last ``STEP_READINGS`` step
    numbers of every step counter that most nodes print (nan where a node did not).

    A number printed by several ranks of one node counts at its first line.  Counters
    come from the scan (``MarkerTrack``), so no wording is assumed."""
    n = job.n_nodes
    need = max(3, SHARED * n)
    by_col: dict[int, list[int]] = {}
    for i in range(n):
        for c, track in job.markers[i].items():
            if track.ts.size and not np.isnan(track.ts).all():
                by_col.setdefault(c, []).append(i)
    blocks = [np.zeros((n, 0))]
    for c, rows in by_col.items():
        if len(rows) < need:
            continue
        per: dict[int, dict[float, float]] = {}
        counted: dict[float, int] = {}
        for i in rows:
            track = job.markers[i][c]
            ok = ~np.isnan(track.ts) & ~np.isnan(track.numbers)
            seen: dict[float, float] = {}
            for num, ts in zip(track.numbers[ok].tolist(), track.ts[ok].tolist(), strict=True):
                seen.setdefault(num, ts)
            per[i] = seen
            for num in seen:
                counted[num] = counted.get(num, 0) + 1
        shared = sorted(num for num, k in counted.items() if k >= need)[-STEP_READINGS:]
        if not shared:
            continue
        block = np.full((n, len(shared)), np.nan)
        for i, seen in per.items():
            block[i] = [seen.get(num, np.nan) for num in shared]
        blocks.append(block)
    return np.hstack(blocks)


#: c10d's watchdog: the collective's sequence number, then how long it had run
_RAN_FOR = re.compile(r"\bSeqNum=(\d+)\b.*?\bran for (\d+) milli", re.I)


def collective_starts(job: ParsedJob) -> np.ndarray:
    """(nodes, readings): when each node's clock says collective N began, read from its
    watchdog's timeout line (the line's time less the "ran for" it states), one reading
    per sequence number that most nodes timed out on (nan where a node did not).

    The ranks that waited entered that collective together, within a step, so the
    readings differ by the nodes' clocks; the rank that never arrived prints no such line
    for it, or a later start (read as a clock ahead, which is never corrected)."""
    n = job.n_nodes
    per = collective_readings(job)
    counted: dict[int, int] = {}
    for d in per:
        for seq in d:
            counted[seq] = counted.get(seq, 0) + 1
    shared = sorted(seq for seq, k in counted.items() if k >= max(3, SHARED * n))
    block = np.full((n, len(shared)), np.nan)
    for i, d in enumerate(per):
        block[i] = [d.get(seq, np.nan) for seq in shared]
    return block


def collective_readings(job: ParsedJob) -> list[dict[int, float]]:
    """Per node: collective sequence number -> when its watchdog says it began (the
    timeout line's time less the "ran for" it states; the earliest where several ranks
    of the node say it)."""
    per: list[dict[int, float]] = [{} for _ in range(job.n_nodes)]
    for i in range(job.n_nodes):
        for c, ex in job.examples[i].items():
            t = float(job.first_ts[i, c])
            m = _RAN_FOR.search(ex[1]) if "ran for" in ex[1] else None
            if m is None or np.isnan(t):
                continue
            seq, start = int(m.group(1)), t - int(m.group(2)) / 1000.0
            per[i][seq] = min(per[i].get(seq, start), start)
    return per
