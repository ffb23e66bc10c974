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
    failure point is where the log ends (a silent crash or a hang).
    """
    present = job.counts[r] > 0
    normal = present & ~cross.anomalous[r]
    last_normal = int(job.last_line[r, normal].max()) if normal.any() else 0
    span = max(int(job.n_lines[r]), 1)
    fresh = job.last_line[r] >= last_normal - max(8.0, 0.05 * span)
    for min_sev in (0.5, 1e-9, -1.0):
        anom = cross.anomalous[r] & (cross.severity >= min_sev) & fresh
        if anom.any():
            cols = np.nonzero(anom)[0]
            pos = job.first_pos[r, cols]
            j = int(cols[np.argmin(pos)])
            return int(job.first_pos[r, j]), int(job.first_line[r, j]), float(job.first_ts[r, j])
    return int(len(job.seqs[r])), None, float(job.node_last_ts[r])
