"""How long a job said it would train: the length it declared at start-up.

A save that fails right after a step is a periodic checkpoint, or the final save of a job
that has run all its steps.  The healthy runs of the configuration say where they ended,
but healthy runs are often shorter (smoke tests, a resumed run's last leg), so a job that
went past their end is not thereby at its own.  Most training programs print their
planned length among their start-up lines ("total steps 200", "max_steps=200",
"train_iters 3900", "Total optimization steps = 200"); which line and which of its numbers
is learned, not assumed: in each healthy run, the start-up line whose number equals the
last step it counted.  The failed job's copy of that line gives its own planned end.

Pure functions over a parsed job and its counter.
"""

from __future__ import annotations

from collections import Counter as Tally

import numpy as np

from l4.iterations import Counter
from l4.mask import named_numbers
from l4.merge import ParsedJob


def _startup_cols(job: ParsedJob, counter: Counter) -> dict[int, list[int]]:
    """Column -> the nodes on which it was printed before that node's first count."""
    out: dict[int, list[int]] = {}
    for i, (pos, num, _) in counter.tracks.items():
        ok = ~np.isnan(num)
        if not ok.any():
            continue
        start = int(pos[ok].min())
        seen = np.nonzero((job.first_pos[i] >= 0) & (job.first_pos[i] < start))[0]
        for c in seen.tolist():
            if c not in counter.cols:
                out.setdefault(c, []).append(i)
    return out


def learn_totals(job: ParsedJob, counter: Counter | None) -> dict[int, int]:
    """Template-store id -> which of its numbers (index in ``named_numbers``) is the last
    step this healthy job counted, for start-up lines that carry it."""
    if counter is None or not counter.tracks:
        return {}
    lasts = counter.last_counts()
    if not lasts:
        return {}
    last = max(lasts.values())
    if last < 2:
        return {}
    out: dict[int, int] = {}
    for c, nodes in _startup_cols(job, counter).items():
        ex = job.examples[nodes[0]].get(c)
        if ex is None:
            continue
        hits = [k for k, v in enumerate(named_numbers(ex[1])) if v == last]
        if len(hits) == 1:
            out[int(job.event_ids[c])] = hits[0]
    return out


def agreed_totals(per_job: list[dict[int, int]]) -> dict[int, int]:
    """The lines that carried the planned length in every healthy job that printed them,
    at the same place."""
    seen: dict[int, set[int]] = {}
    for totals in per_job:
        for cid, k in totals.items():
            seen.setdefault(cid, set()).add(k)
    return {cid: ks.pop() for cid, ks in seen.items() if len(ks) == 1}


def declared_end(job: ParsedJob, totals: dict[int, int]) -> float | None:
    """The planned last step the failed job printed in the lines ``totals`` names (the
    most common reading across its nodes), or None when it printed none of them."""
    if not totals:
        return None
    col = {int(cid): c for c, cid in enumerate(job.event_ids)}
    votes: Tally[float] = Tally()
    for cid, k in totals.items():
        c = col.get(cid)
        if c is None:
            continue
        for i in range(job.n_nodes):
            ex = job.examples[i].get(c)
            nums = named_numbers(ex[1]) if ex else []
            if len(nums) > k:
                votes[nums[k]] += 1
    return votes.most_common(1)[0][0] if votes else None
