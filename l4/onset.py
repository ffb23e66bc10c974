"""The failure point: where a node's own trouble begins.

The first unusual, troubling event of a node that it did not then work past normally; for a
node that went silent (a crash, a hang), where its log ends.  Stage and iteration questions
both start from here.
"""

from __future__ import annotations

import math

import numpy as np

from l4.crossjob import CrossJobResult
from l4.merge import ParsedJob


def time_near(job: ParsedJob, r: int, line: int) -> float:
    """Clock time of line ``line`` of node ``r`` when that line carries none (traceback
    text, srun messages): the time of the nearest line of the node whose time is known.

    The first and last occurrence of every event are such points, so this needs no
    per-line index; a line before wins a tie (it cannot be later than the failure).
    """
    lines, ts = _timed_points(job, r)
    if not lines.size:
        return math.nan
    dist = np.abs(lines - line) * 2 + (lines > line)
    return float(ts[int(np.argmin(dist))])


def next_time(job: ParsedJob, r: int, line: int) -> float:
    """Time of the first line of node ``r`` at or after ``line`` that carries one (the
    launcher or the watchdog reporting an exit after an untimed traceback); nan when
    nothing after it is timed."""
    lines, ts = _timed_points(job, r)
    after = lines >= line
    if not after.any():
        return math.nan
    return float(ts[after][np.argmin(lines[after])])


def _timed_points(job: ParsedJob, r: int) -> tuple[np.ndarray, np.ndarray]:
    """(line, time) of the first and last occurrence of every event of node ``r`` that
    carries a time."""
    lines = np.concatenate((job.first_line[r], job.last_line[r]))
    ts = np.concatenate((job.first_ts[r], job.last_ts[r]))
    ok = (lines > 0) & ~np.isnan(ts)
    return lines[ok], ts[ok]


def onset(job: ParsedJob, cross: CrossJobResult, r: int) -> tuple[int, int | None, float]:
    """(record position, line, timestamp) where node ``r`` first shows trouble.

    Unusual events that the node then worked normally long after (a benign start-up error
    this healthy run happened to print) are not the failure; when nothing else is left the
    failure point is where the log ends (a silent crash or a hang).  An event that came
    once, was worked past, and came back for good begins the failure where it came back
    (``_final_run_start``).
    """
    present = job.counts[r] > 0
    normal = present & ~cross.anomalous[r]
    fresh = _fresh(job, cross, r)
    gap = max(8.0, 0.05 * max(len(job.seqs[r]), 1))
    for min_sev in (0.5, 1e-9, -1.0):
        anom = cross.anomalous[r] & (cross.severity >= min_sev) & fresh
        if anom.any():
            cols = np.nonzero(anom)[0]
            worked = _Worked(job.seqs[r], normal)
            starts = [_final_run_start(job, r, int(c), gap, worked) for c in cols]
            k = int(np.argmin(starts))
            j, p = int(cols[k]), starts[k]
            if p == job.first_pos[r, j]:
                return int(p), int(job.first_line[r, j]), float(job.first_ts[r, j])
            line = _line_at(job, r, p, j)
            return int(p), line, time_near(job, r, line)
    return int(len(job.seqs[r])), None, float(job.node_last_ts[r])


def _fresh(job: ParsedJob, cross: CrossJobResult, r: int) -> np.ndarray:
    """Per event, whether node ``r`` last printed it near or after its last normal line:
    an event the node then logged normally long after was worked past."""
    normal = (job.counts[r] > 0) & ~cross.anomalous[r]
    last_normal = int(job.last_line[r, normal].max()) if normal.any() else 0
    span = max(int(job.n_lines[r]), 1)
    return job.last_line[r] >= last_normal - max(8.0, 0.05 * span)


def worked_past(job: ParsedJob, cross: CrossJobResult, r: int) -> list[int]:
    """Event ids of node ``r``'s unusual events that it then worked past normally (a
    start-up warning hours before the end): what it printed there is not where its
    trouble began, however error-like it reads.  Who reads the failure's cause from the
    report's lines (``l4.rootcause``) skips them."""
    past = (job.counts[r] > 0) & cross.anomalous[r] & ~_fresh(job, cross, r)
    return [int(job.event_ids[c]) for c in np.flatnonzero(past)]


class _Worked:
    """Normal records of a node's log counted up to each position, computed on first use
    (most onsets need none: their events came once, or all in one run)."""

    def __init__(self, seq: np.ndarray, normal: np.ndarray) -> None:
        self.seq, self.normal, self._cum = seq, normal, None

    def at(self, positions: np.ndarray) -> np.ndarray:
        if self._cum is None:
            self._cum = np.cumsum(self.normal[self.seq])
        return self._cum[positions]


def _final_run_start(job: ParsedJob, r: int, c: int, gap: float, worked: _Worked) -> int:
    """Record position where the last run of event ``c`` on node ``r`` begins.

    An event that also came once long before, and that the node then worked past normally
    for ``gap`` records or more (DeepSpeed's occasional "OVERFLOW! Skipping step", a
    transient NCCL warning), began its trouble where it came back for good, not at that
    first sighting.  Occurrences with less normal work between them are one run: an
    overflow every step until the loss scale bottoms out began with the first of them, and
    an error echoed again in the teardown that followed it was not worked past."""
    first = int(job.first_pos[r, c])
    if job.counts[r, c] <= 1:
        return first
    occ = np.flatnonzero(job.seqs[r] == c)
    if occ.size <= 1:
        return first
    breaks = np.flatnonzero(np.diff(worked.at(occ)) >= gap)
    return int(occ[breaks[-1] + 1]) if breaks.size else first


def _line_at(job: ParsedJob, r: int, pos: int, c: int) -> int:
    """Line number of record ``pos`` of node ``r`` (an occurrence of event ``c`` after its
    first), from the nearest event that first appeared at or before it: records are one
    line or more, so that line plus the records in between, kept inside the lines event
    ``c`` spans."""
    fp, fl = job.first_pos[r], job.first_line[r]
    ok = (fp >= 0) & (fp <= pos) & (fl > 0)
    if ok.any():
        k = int(np.argmax(np.where(ok, fp, -1)))
        line = int(fl[k]) + (pos - int(fp[k]))
    else:
        line = int(job.first_line[r, c])
    return int(min(max(line, int(job.first_line[r, c])), int(job.last_line[r, c])))
