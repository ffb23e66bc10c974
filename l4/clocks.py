"""Clocks: how far each node's clock is off the job's, read from lines printed in step.

Hosts' clocks disagree, by milliseconds on a well-run cluster and by tens of seconds on a
badly run one.  "Who stopped first" compares when nodes' logs ended, so a node whose clock
runs behind seems to stop first.  Lines that every node prints at one moment of the job
(start-up barriers, the process group coming up, a save every rank joins) show the offset:
a node that printed each of them 25 s before the others' median did has a clock 25 s
behind.  Only lines printed before anything went wrong count: the failure itself reaches
nodes at different times, and that difference is the evidence, not the clock.
"""

from __future__ import annotations

import numpy as np

from l4.crossjob import CrossJobResult
from l4.merge import ParsedJob

#: offsets smaller than this are reading noise (a barrier releases nodes a little apart)
MIN_OFFSET_S = 1.0
#: a line must be printed by this share of the nodes to show how their clocks stand
SHARED = 0.8
#: and there must be this many such lines, whose readings of one node's offset agree
MIN_LINES = 2


def clock_offsets(job: ParsedJob, cross: CrossJobResult) -> np.ndarray:
    """Per node: seconds its clock is behind the job's median clock, as a negative number
    (0 where unknown, below ``MIN_OFFSET_S``, or ahead).

    Only a clock behind is read: it makes a node seem to stop first, and correcting it
    takes that false lead away.  A node whose start-up lines came late may have started
    late rather than have a clock ahead; correcting it would lend it a lead it never had.

    Each shared line (printed by most nodes, nothing unusual about it) gives every node
    that printed it the difference between its first time and the median first time; a
    node's offset is the median of its differences over those lines.
    """
    n = job.n_nodes
    out = np.zeros(n)
    if n < 3:
        return out
    first = job.first_ts
    printed = ~np.isnan(first) & (job.counts > 0)
    routine = ~cross.anomalous.any(axis=0)
    cols = np.nonzero(routine & (printed.sum(axis=0) >= max(3, SHARED * n)))[0]
    if cols.size < MIN_LINES:
        return out
    sub = first[:, cols]
    ref = np.nanmedian(sub, axis=0)
    diff = sub - ref[None, :]
    for i in range(n):
        d = diff[i][~np.isnan(diff[i])]
        if d.size < MIN_LINES:
            continue
        off = float(np.median(d))
        # a clock that is off moves every line by as much; lines that disagree about it
        # (a node that merely loaded its shards later) say nothing about its clock
        agree = float(np.median(np.abs(d - off))) <= max(MIN_OFFSET_S, 0.2 * abs(off))
        if off <= -MIN_OFFSET_S and agree:
            out[i] = off
    return out
