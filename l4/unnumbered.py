"""Steps counted by a line that prints no step number.

Hugging Face's Trainer without a progress bar (a launcher that is no terminal, or
``disable_tqdm``) reports training as ``{'loss': 1.27, 'grad_norm': 0.58, 'epoch': 1.79}``
every ``logging_steps`` steps: no step number.  The numbered lines it prints are far apart
(``Saving model checkpoint to .../checkpoint-3840`` every 120 steps), so the counter
l4 finds is that save, and the step in progress is known only to the nearest 120.

The unnumbered line still counts ("counters that advance"): between two saves 240 steps
apart it was printed 24 times, so it is printed every 10 steps, and the second one after
``checkpoint-3840`` is step 3860.  A line that every interval of the numbered counter
holds in the same proportion (the same whole number of steps per line, at least two
intervals, denser than the counter) becomes the counter, numbered from the anchors.  The
framework logs before it saves or evaluates at a step, so the last line before an anchor
is the anchor's own step.

The other way round, a line that prints no number beside a counter that counts every
step (a progress bar) reports every ``k`` steps (``report_stride``): the failure's step
is also named by the interval that line would have reported it in.
"""

from __future__ import annotations

import re

import numpy as np

from l4.iterations import LIBRARY_LOG, Counter
from l4.merge import ParsedJob
from l4.severity import reports_trouble

#: complete intervals of the numbered counter the line must fit, all with one stride ...
MIN_INTERVALS = 2
#: ... or one interval that holds it this often, when it is printed outside it too (a job
#: resumed from a checkpoint saves twice before it fails)
MIN_LINES_ONE = 4
#: its lines in an interval span at least this share of the interval's records
SPREAD = 0.5
#: report lines that must each find the counter further by the same stride
MIN_REPORTS = 3
#: a report line's stride is at most this many of the counter's steps (a save every
#: 7600 steps is no report of training's progress)
MAX_REPORT_RATIO = 50


def densify(job: ParsedJob, counter: Counter | None, stages: list[str | None],
            anomalous: np.ndarray) -> Counter | None:
    """A counter read from an unnumbered line printed every ``k`` steps, or None when no
    line fits.  The anchors are any numbered line of the same node that advances (the
    counter's, a save's, an evaluation's); ``k`` must be finer than the counter's step."""
    best: tuple[float, int, int, dict] | None = None
    limit = counter.step if counter is not None else float("inf")
    for i in range(job.n_nodes):
        seq = job.seqs[i]
        cands = _candidates(job, counter, stages, anomalous, i, 2)
        for anchors in _anchor_tracks(job, counter, i, anomalous, stages):
            for c in cands:
                pos = np.flatnonzero(seq == c)
                k = _stride(pos, anchors, seq)
                if k is None or k >= limit or (counter is not None and counter.step % k):
                    continue
                key = (k, -len(pos))
                if best is None or key < best[:2]:
                    best = (k, -len(pos), c, {i: (pos, _numbers(pos, anchors, k))})
    if best is None:
        return None
    k, _, c, tracks = best
    tracks = {i: (pos, num, np.full(len(pos), np.nan)) for i, (pos, num) in tracks.items()}
    return Counter(marker=c, cols=[c], tracks=tracks, step=float(k))


def _candidates(job: ParsedJob, counter: Counter | None, stages: list[str | None],
                anomalous: np.ndarray, i: int, least: int) -> list[int]:
    """Node ``i``'s lines that may count steps without a number: printed ``least`` times
    or more, in training or no known phase, no counter, no error report, no collective
    library's own log line."""
    cols = set(counter.cols) if counter is not None else set()
    return [c for c in np.flatnonzero(job.counts[i] >= least).tolist()
            if c not in cols and stages[c] in (None, "training") and not anomalous[i, c]
            and c not in job.markers[i] and not LIBRARY_LOG.search(job.templates[c])
            and not reports_trouble(job.templates[c])]


def _anchor_tracks(job: ParsedJob, counter: Counter | None, i: int,
                   anomalous: np.ndarray, stages: list[str | None]) -> list[list[tuple[int, float]]]:
    """Node ``i``'s numbered lines that count the job's steps, as anchors: the counter's
    track, and the saves and evaluations that name their step (in the counter's range
    when there is one).  Other advancing numbers (NCCL's channels, a shard bar) count
    something else."""
    out = []
    lo, hi = -np.inf, np.inf
    if counter is not None and i in counter.tracks:
        tpos, tnum, _ = counter.tracks[i]
        ok = ~np.isnan(tnum)
        out.append(_anchors(tpos[ok], tnum[ok]))
        if ok.any():
            lo, hi = float(tnum[ok].min()) - counter.step, float(tnum[ok].max()) + counter.step
    for c, track in job.markers[i].items():
        if (anomalous[i, c] or (counter is not None and c in counter.cols)
                or stages[c] not in ("checkpointing", "evaluation")):
            continue
        ok = ~np.isnan(track.numbers)
        if counter is not None and not ((track.numbers[ok] >= lo) & (track.numbers[ok] <= hi)).all():
            continue
        anchors = _anchors(track.positions[ok], track.numbers[ok])
        if len(anchors) >= MIN_INTERVALS + 1:
            out.append(anchors)
    named = _path_anchors(job, i, anomalous, stages)
    if named and (counter is None or all(lo <= v <= hi for _, v in named)):
        out.append(named)
    return [a for a in out if len(a) >= 2]


#: a checkpoint named by its step in its path: "checkpoint-25900", "global_step900",
#: "iter_0000100", "step_15.pt"
_STEP_NAME = re.compile(r"(?:checkpoint|ckpt|global_step|step|iter(?:ation)?)[-_]?(\d+)(?![\w-])", re.I)
#: a line that loads the checkpoint the run goes on from
_RESUMED = re.compile(r"\b(?:load(?:ing|ed)?|resum(?:e|es|ing|ed)|restor(?:e|es|ing|ed)|"
                      r"continu(?:e|es|ing))\b", re.I)


def _step_named(text: str | None) -> int | None:
    """The step a line's checkpoint path names (its last such name), or None."""
    found = _STEP_NAME.findall(text or "")
    return int(found[-1]) if found else None


def _path_anchors(job: ParsedJob, i: int, anomalous: np.ndarray,
                  stages: list[str | None]) -> list[tuple[int, float]]:
    """Anchors from saves that name their step only in a path ("Saving model checkpoint
    to .../checkpoint-25900", where the masked path leaves the template no number): the
    node's first and last such save, and before them the checkpoint the run resumed from
    ("Loading model from .../checkpoint-25200"): a resumed run counts on from it.  Steps
    between two anchors are counted the same way whatever saves lie between them."""
    best: list[tuple[int, float]] = []
    for c in np.flatnonzero(job.counts[i] >= 2).tolist():
        if stages[c] != "checkpointing" or anomalous[i, c] or job.last_pos is None:
            continue
        first, last = job.examples[i].get(c), job.last_examples[i].get(c)
        a, b = _step_named(first[1] if first else None), _step_named(last)
        pa, pb = int(job.first_pos[i, c]), int(job.last_pos[i, c])
        if a is None or b is None or not (a < b and 0 <= pa < pb):
            continue
        anchors = [(pa, float(a)), (pb, float(b))]
        start = None
        for r in np.flatnonzero(job.counts[i] > 0).tolist():
            ex = job.examples[i].get(r)
            n = _step_named(ex[1]) if ex and _RESUMED.search(job.templates[r]) else None
            at = int(job.first_pos[i, r])
            if n is not None and n < a and 0 <= at < pa and (start is None or at > start[0]):
                start = (at, float(n))
        if start is not None:
            anchors.insert(0, start)
        if len(anchors) > len(best):
            best = anchors
    return best


def _anchors(pos: np.ndarray, num: np.ndarray) -> list[tuple[int, float]]:
    """(position, count) where the numbered counter first printed each new count, in
    order; a count printed again (by a second line of the same save) is one anchor."""
    out: list[tuple[int, float]] = []
    for p, n in zip(pos.tolist(), num.tolist(), strict=True):
        if out and n <= out[-1][1]:
            continue
        out.append((int(p), float(n)))
    return out


def _stride(pos: np.ndarray, anchors: list[tuple[int, float]],
            seq: np.ndarray | None = None) -> int | None:
    """Steps per line when every complete interval between anchors holds the line once
    per the same whole number of steps; None otherwise.

    ``seq``, the node's records, tells a burst from steps going by: the line's copies
    bunched in a stretch of the interval that other repeated lines fill (every rank's copy
    of one line beside the steps' own lines) are no steps.  Lines an interval holds once
    (an evaluation's banner, a save's two lines) pass no steps, so they do not count
    towards the stretch: a Trainer without a progress bar prints its loss lines back to
    back, then evaluates and saves.
    """
    ks = set()
    for n, ((a, va), (b, vb)) in enumerate(zip(anchors, anchors[1:], strict=False)):
        inside = pos[(pos > a) & (pos < b)]
        m = len(inside)
        if m == 0:
            return None
        # a line first printed inside the first interval began there: what the node
        # printed before it (a resumed run's start-up, every rank's copy of each line)
        # passed no steps
        since = int(inside[0]) - 1 if n == 0 and not (pos < a).any() else a
        if m > 1 and inside[-1] - inside[0] < SPREAD * (_stretch(seq, since, b) - 1):
            return None  # a burst (every rank's copy of one line), not steps going by
        gap = vb - va
        if gap <= 0 or gap % m:
            return None
        ks.add(int(gap // m))
        if len(ks) > 1:
            return None
    k = ks.pop() if ks else None
    if k is None or k < 1:
        return None
    if len(anchors) < MIN_INTERVALS + 1:
        a, b = anchors[0][0], anchors[-1][0]
        if ((pos > a) & (pos < b)).sum() < MIN_LINES_ONE or not ((pos < a) | (pos > b)).any():
            return None
    return k


def _stretch(seq: np.ndarray | None, a: int, b: int) -> int:
    """Records strictly between positions ``a`` and ``b`` that steps can fill: all of
    them without ``seq``, else those of lines printed more than once in between."""
    if seq is None:
        return b - a - 1
    _, counts = np.unique(seq[a + 1:b], return_counts=True)
    return int(counts[counts >= 2].sum())


def _numbers(pos: np.ndarray, anchors: list[tuple[int, float]], k: int) -> np.ndarray:
    """The step of each line: counted on from the anchor before it (the last line before an
    anchor is the anchor's step), back from the first anchor for lines before it."""
    apos = np.array([a for a, _ in anchors])
    aval = np.array([v for _, v in anchors])
    out = np.empty(len(pos))
    idx = np.searchsorted(apos, pos, side="right") - 1  # anchor before each line, -1: none
    for j in range(-1, len(anchors)):
        sel = np.flatnonzero(idx == j)
        if not sel.size:
            continue
        if j < 0:
            out[sel] = aval[0] - k * (len(sel) - 1 - np.arange(len(sel)))
        else:
            out[sel] = aval[j] + k * (1 + np.arange(len(sel)))
    return out


def report_stride(job: ParsedJob, counter: Counter, stages: list[str | None],
                  anomalous: np.ndarray) -> int | None:
    """Steps between two lines of the job's unnumbered report (a loss line every 20 steps
    beside a progress bar that counts every one), read against the counter: the count the
    counter had reached at each report line advances by the same whole number each time,
    a multiple of the counter's step; or a numbered line that advances by such a stride.
    Only beside a counter of every step: one printed every few names the interval itself.
    The densest report when there are several (a loss line before an evaluation).  None
    without one."""
    if counter.step != 1:
        return None  # a counter printed every few steps names the interval itself
    best: tuple[int, int] | None = None  # (stride, -lines): the densest report first
    for i, (tpos, tnum, _) in counter.tracks.items():
        ok = ~np.isnan(tnum)
        order = np.argsort(tpos[ok], kind="stable")
        apos, aval = tpos[ok][order], tnum[ok][order]
        if len(apos) < 3:
            continue
        seq = job.seqs[i]
        for c in _candidates(job, counter, stages, anomalous, i, MIN_REPORTS):
            pos = np.flatnonzero(seq == c)
            before = np.searchsorted(apos, pos, side="left") - 1
            if (before < 0).any():
                pos, before = pos[before >= 0], before[before >= 0]
            k = _even_stride(aval[before])
            if k is not None and _reports_every(k, counter.step) and (
                    best is None or (k, -len(pos)) < best):
                best = (k, -len(pos))
        lo, hi = float(aval.min()) - counter.step, float(aval.max()) + counter.step
        for c, track in job.markers[i].items():
            # a report line that numbers its step ("'global_step/max_steps': '10825/11600'"
            # every 25 steps under a bar of every step): its own stride
            if (c in counter.cols or stages[c] not in (None, "training") or anomalous[i, c]
                    or LIBRARY_LOG.search(job.templates[c])):
                continue
            nums = track.numbers[~np.isnan(track.numbers)]
            if not ((nums >= lo) & (nums <= hi)).all():
                continue
            k = _even_stride(nums)
            if k is not None and _reports_every(k, counter.step) and (
                    best is None or (k, -len(nums)) < best):
                best = (k, -len(nums))
    return best[0] if best is not None else None


def _reports_every(k: int, step: float) -> bool:
    """A stride a report line beside a counter of ``step`` can have: a multiple of it,
    coarser, and not too coarse."""
    unit = int(max(step, 1))
    return step < k <= MAX_REPORT_RATIO * unit and k % unit == 0


def _even_stride(values: np.ndarray) -> int | None:
    """The whole number ``values`` advance by each time, over :data:`MIN_REPORTS` or more
    of them; None when they do not."""
    diffs = np.diff(values)
    if len(diffs) < MIN_REPORTS - 1 or not (diffs == diffs[0]).all() or diffs[0] != int(diffs[0]):
        return None
    return int(diffs[0])
