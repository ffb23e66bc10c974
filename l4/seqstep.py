"""The step in progress at the failure, read from the collective the ranks were in.

A job that prints its counter every 50 steps says the fault came after step 19250 and at
or before 19300.  When its lines carry no clock (``l4.stepclock`` then cannot tell), the
collectives still count: every rank numbers the collectives of a process group as it
issues them, and a training step issues the same number of them each time (one
all-reduce per gradient bucket, the same gathers and scatters).  The watchdog that gives
up on a collective names its number ("WorkNCCL(SeqNum=99449, ...)", "Timeout at NCCL
work: 99449", "last completed NCCL work: 99448"), and so does the collective-mismatch
check ("CollectiveFingerPrint(SequenceNumber=...)").

So the sequence number is a second counter that advances with the steps, ``k`` per step,
and the printed counter bounds the step: only a few values of ``k`` put ``seq / k`` inside
the interval the job would have printed next, and where the interval is narrow next to
the step's own spacing (``step / k`` apart for neighbouring ``k``), one does.  That
needs no wording beyond the sequence number and no knowledge of the model.

Where start-up collectives (a parameter broadcast, barriers) come before the first step,
the reading is later by a few collectives, a fraction of a step when ``k`` is large; the
estimate is clipped to the interval, so a reading that is off can move the answer only
inside it.
"""

from __future__ import annotations

import math
import re
from collections import Counter as Tally

import numpy as np

from l4.crossjob import CrossJobResult
from l4.merge import ParsedJob

#: lines that name the collective in progress: (pattern, what to add to its number)
_IN_PROGRESS = (
    (re.compile(r"\bSeqNum=(\d+)"), 0),
    (re.compile(r"\bTimeout at NCCL work: (\d+)"), 0),
    (re.compile(r"\blast completed NCCL work: (\d+)"), 1),
    (re.compile(r"\bSequenceNumber=(\d+)"), 0),
)

#: at most this many steps fit the reading before it is too ambiguous to report
MAX_FITS = 2


def collective_in_progress(job: ParsedJob, cross: CrossJobResult) -> int | None:
    """The sequence number of the collective the job was in when it failed: the one most
    nodes name in lines that healthy runs do not print (``None`` without such lines).

    Each node votes once per number, so a node whose ranks print it eight times counts
    once; a tie goes to the earlier number (a rank that had issued one more collective
    before its peers stalled is the exception)."""
    votes: Tally[int] = Tally()
    for i in range(job.n_nodes):
        seen: set[int] = set()
        for c in np.nonzero(cross.anomalous[i])[0].tolist():
            texts = [job.last_examples[i].get(c, "")]
            ex = job.examples[i].get(c)
            if ex is not None:
                texts.append(ex[1])
            for text in texts:
                if "NCCL work" not in text and "Seq" not in text:
                    continue
                for pattern, plus in _IN_PROGRESS:
                    seen.update(int(m.group(1)) + plus for m in pattern.finditer(text))
        votes.update(seen)
    if not votes:
        return None
    return min(votes, key=lambda s: (-votes[s], s))


def steps_from_sequence(seq: int, current: float, step: float) -> list[int]:
    """The steps that collective ``seq`` can be in, when the job would have printed
    ``current`` next and prints every ``step`` steps: ``(seq - 1) // k`` for every whole
    ``k`` (collectives per step) that lands in ``current - step < F <= current``, give or
    take one.  Empty when none or more than ``MAX_FITS`` fit (early in a job every ``k``
    fits somewhere)."""
    lo, hi = current - step, current + 1  # one either side of (current - step, current]
    if seq < 2 or step <= 1 or lo < 1:
        return []
    n = seq - 1
    # walk the interval's steps, not the counts per step: a step f fits when some whole
    # k has n // k == f, i.e. n // f > n // (f + 1); the interval is short, while the
    # counts per step that land in it can be hundreds of thousands early in a long job
    fits: list[int] = []
    for f in range(math.floor(hi), math.ceil(lo) - 1, -1):
        if n // f > n // (f + 1):
            fits.append(int(min(max(f, current - step + 1), current)))
    fits = list(dict.fromkeys(fits))
    return fits if 0 < len(fits) <= MAX_FITS else []


def steps_at_failure(job: ParsedJob, cross: CrossJobResult, current: float | None,
                     step: float) -> list[int]:
    """The step(s) in progress at the failure by the collectives' count (module
    docstring); empty where the logs name no collective or the count cannot tell."""
    if current is None or step <= 1:
        return []
    seq = collective_in_progress(job, cross)
    return [] if seq is None else steps_from_sequence(seq, current, step)
