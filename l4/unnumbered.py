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
"""

from __future__ import annotations

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


def densify(job: ParsedJob, counter: Counter | None, stages: list[str | None],
            anomalous: np.ndarray) -> Counter | None:
    """A counter read from an unnumbered line printed every ``k`` steps, or None when no
    line fits.  The anchors are any numbered line of the same node that advances (the
    counter's, a save's, an evaluation's); ``k`` must be finer than the counter's step."""
    best: tuple[float, int, int, dict] | None = None
    cols = set(counter.cols) if counter is not None else set()
    limit = counter.step if counter is not None else float("inf")
    for i in range(job.n_nodes):
        seq = job.seqs[i]
        cands = [c for c in np.flatnonzero(job.counts[i] >= 2).tolist()
                 if c not in cols and stages[c] in (None, "training") and not anomalous[i, c]
                 and c not in job.markers[i] and not LIBRARY_LOG.search(job.templates[c])
                 and not reports_trouble(job.templates[c])]
        for anchors in _anchor_tracks(job, counter, i, anomalous, stages):
            for c in cands:
                pos = np.flatnonzero(seq == c)
                k = _stride(pos, anchors)
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
    return [a for a in out if len(a) >= 2]


def _anchors(pos: np.ndarray, num: np.ndarray) -> list[tuple[int, float]]:
    """(position, count) where the numbered counter first printed each new count, in
    order; a count printed again (by a second line of the same save) is one anchor."""
    out: list[tuple[int, float]] = []
    for p, n in zip(pos.tolist(), num.tolist(), strict=True):
        if out and n <= out[-1][1]:
            continue
        out.append((int(p), float(n)))
    return out


def _stride(pos: np.ndarray, anchors: list[tuple[int, float]]) -> int | None:
    """Steps per line when every complete interval between anchors holds the line once
    per the same whole number of steps; None otherwise."""
    ks = set()
    for (a, va), (b, vb) in zip(anchors, anchors[1:], strict=False):
        inside = pos[(pos > a) & (pos < b)]
        m = len(inside)
        if m == 0:
            return None
        if m > 1 and inside[-1] - inside[0] < SPREAD * (b - a - 1):
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
