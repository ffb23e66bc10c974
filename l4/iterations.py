"""Iterations: which counter counts training steps, and which iterations went wrong.

The step counter is found from the data (a template whose number advances by a fixed step,
see ``l4.scan``), so unknown formats work; the profile only breaks ties.  Each iteration's
event sequence is compared by DTW with the preceding ``WINDOW`` ones and flagged by the
3-sigma rule, as in the paper; iteration durations are checked the same way (slow node,
hang).  The iteration that matters is the first that did not complete normally: the one in
progress at the failure point, or where a slowdown or an alarming streak that lasted to the
end began.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
from dtaidistance import dtw
from numpy.lib.stride_tricks import sliding_window_view

from l4.crossjob import CrossJobResult
from l4.gather import host_tokens
from l4.merge import ParsedJob
from l4.onset import onset
from l4.profiles import Profile
from l4.scan import RATE, per_line, unwrap_counts
from l4.severity import reports_trouble

WINDOW = 10


SIGMA = 3.0
#: a spike that ended WINDOW printed counts before the failure is listed after the failure's
#: interval and its neighbours (scores 5.0 .. 0.5): z / 4 times this is at most 0.3
FAR_SPIKE_FACTOR = 0.1
#: occurrences a line needs to stand in for the counter on a node that prints none
PROXY_MIN = 5


@dataclass
class Counter:
    """The job's iteration counter: its event columns, per-node tracks and step."""

    marker: int  # the column chosen as the counter
    cols: list[int]  # it and the columns that carry on its count
    tracks: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]  # node -> (pos, iter, ts)
    step: float
    # node -> a clock for step durations where its lines carry none: the steps' own
    # printed durations, summed (``MarkerTrack.durations``)
    clocks: dict[int, np.ndarray] = field(default_factory=dict)
    # node -> where each of its counts was printed first (the track keeps a count's last
    # line; a progress bar redraws its last count when the process exits, after the failure)
    firsts: dict[int, np.ndarray] = field(default_factory=dict)
    # node -> (line number, printed step duration in seconds or nan) of each count
    printed: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # nodes whose clock is coarse: a progress bar's (its speed is smoothed over many
    # updates, its elapsed field whole seconds) or a printed speed's, which jitter by
    # several percent from step to step where a time of day or a printed duration does not
    coarse: set[int] = field(default_factory=set)

    def last_counts(self, min_len: int = 1) -> dict[int, float]:
        """Node -> the furthest count it printed, for nodes with ``min_len`` counts or more."""
        return {i: float(np.nanmax(t[1])) for i, t in self.tracks.items()
                if t[1].size >= min_len and not np.isnan(t[1]).all()}

    def clock(self, i: int) -> np.ndarray:
        """Per-line times of node ``i``'s counter lines for measuring step durations: the
        lines' clock, or the sum of the durations they print when they carry no clock."""
        return self.clocks.get(i, self.tracks[i][2])


def find_counter(job: ParsedJob, profile: Profile, stages: list[str | None],
                 known: Collection[int] = (), startup: Collection[int] = ()) -> Counter | None:
    """The iteration counter of a job, or ``None`` when nothing counts steps.

    ``known``: template-store ids of the counters healthy runs of the same configuration
    advanced (``l4.phases.Timeline.counters``); ``startup``: those the healthy runs
    printed before their counter started (``Timeline.startup_ids``).
    """
    marker = choose_marker(job, profile, stages, known, startup)
    if marker is None:
        return None
    cols = same_counter(job, profile, stages, marker)
    tracks, clocks, firsts, printed = {}, {}, {}, {}
    coarse: set[int] = set()
    for i, mk in enumerate(job.markers):
        if any(c in mk for c in cols):
            pos, num, ts, dur, lines, el = _joined([mk[c] for c in cols if c in mk])
            tracks[i] = (pos, num, ts)
            # a speed stands in for the step's duration in no known unit: it shows a slow
            # step, but is no number of seconds to count steps by (``l4.stepclock``)
            rate = any(c in mk and (mk[c].duration_field or (0, 0.0))[1] == RATE for c in cols)
            if np.isnan(ts).all() and (rate or any(getattr(mk[c], "bar", False) for c in cols if c in mk)):
                coarse.add(i)
            printed[i] = (lines, np.full(len(dur), np.nan) if rate else dur)
            firsts[i] = _first_seen([mk[c] for c in cols if c in mk], num, pos)
            bar = bar_clock(el, num) if np.isnan(ts).all() else None
            if bar is not None:
                clocks[i] = bar
            elif np.isnan(ts).all() and (~np.isnan(dur)).sum() >= 3:
                # lines that state no duration (a second wording of the counter line, one
                # whose duration the scanner could not read) took a typical step's time:
                # counting them as instant would read as a slowdown where the wording
                # changed
                clocks[i] = np.cumsum(np.where(np.isnan(dur), np.nanmedian(dur), dur))
    steps = [s for s in (counter_step(t[1]) for t in tracks.values()) if s]
    step = float(np.median(steps)) if steps else 1.0
    return Counter(marker, cols, tracks, step, clocks, firsts, printed, coarse)


def _carried(x: np.ndarray) -> np.ndarray:
    """nan entries take the value before them (the first value where none is before)."""
    ok = ~np.isnan(x)
    if not ok.any():
        return x
    idx = np.where(ok, np.arange(len(x)), 0)
    np.maximum.accumulate(idx, out=idx)
    out = x[idx]
    first = int(np.argmax(ok))
    out[:first] = x[first]
    return out


#: seconds a progress bar must move on between its lines, on average, for its elapsed
#: field (whole seconds) to time steps: 5 s keeps the rounding within a fifth of a line
BAR_MIN_INTERVAL = 5.0


def bar_clock(elapsed: np.ndarray, nums: np.ndarray | None = None) -> np.ndarray | None:
    """Per-line times of a counter printed by a progress bar, from the bar's own elapsed
    field (``MarkerTrack.elapsed``), or ``None`` when too few lines carry it.

    The bar's speed ("9.19s/it") is smoothed over many updates, so a step that turned slow
    shows there only dozens of steps later; its elapsed time moves by the very seconds the
    step took.  A bar that starts over (the next epoch's) goes on from where the last one
    stopped; a line without the field gets its time from its count (``nums``), between the
    lines around it that have one, or else the time of the one before it.  A bar whose
    time goes back without starting over is no clock (None): tqdm's never does."""
    ok = ~np.isnan(elapsed)
    if ok.sum() < 3 or ok.sum() < 0.8 * len(elapsed):
        return None
    out = np.full(len(elapsed), np.nan)
    t = prev = 0.0
    for k, e in enumerate(elapsed.tolist()):
        if e == e:
            if e >= prev:
                t += e - prev
            elif e <= 0.5 * prev:
                t += e  # a new bar: its time counts from zero
            else:
                return None
            prev = e
            out[k] = t
    known = ~np.isnan(out)
    if nums is not None and len(nums) == len(out) and not np.isnan(nums[known]).any() \
            and (np.diff(nums[known]) > 0).all():
        gaps = ~known & ~np.isnan(nums)
        out[gaps] = np.interp(nums[gaps], nums[known], out[known])
    out = _carried(out)
    # whole seconds: a bar that moves on every few tenths of a second shows its steps as
    # 0 s and 1 s at random, no clock for a slow one
    if (out[-1] - out[0]) / max(len(out) - 1, 1) < BAR_MIN_INTERVAL:
        return None
    return out


#: a collective library's own log lines (NCCL_DEBUG=INFO and its kin)
LIBRARY_LOG = re.compile(r"\b[NHR]CCL (?:INFO|WARN|TRACE)\b")


def choose_marker(job: ParsedJob, profile: Profile, stages: list[str | None],
                  known: Collection[int] = (), startup: Collection[int] = ()) -> int | None:
    """The event column that counts iterations.

    The line that counted steps in healthy runs of the same configuration first (``known``:
    it counts even when the job died after two steps), then the framework's own iteration
    line, then any line the generic rules call an iteration line, then the counter that
    counted the most distinct steps on one node.  Distinct steps, not lines: eight local
    ranks printing "[Rank 3] (after 1000 iterations)" once each make a counter of ranks,
    not of progress.  Nor is a line that healthy runs of the same configuration printed
    only before their steps began (``startup``): NCCL's "Channel 00/02 : 0[0] -> 1[0]"
    lines count channels, and a job that died loading its checkpoint never counted a step.
    """
    known = set(known)
    startup = set(startup) - known
    score: dict[int, int] = {}
    values: dict[int, list[set]] = {}
    roll = _roll_calls(job)
    for i, mk in enumerate(job.markers):
        for c, track in mk.items():
            if stages[c] not in (None, "training") or int(job.event_ids[c]) in startup:
                continue  # save/eval counters, shard and dataset progress bars, start-up
            if (i, c) in roll:
                continue  # "Waiting for host algo-7": the number is a host's
            seen = set(_counted(track).tolist())
            score[c] = max(score.get(c, 0), len(seen))
            values.setdefault(c, []).append(seen)
    for c, sets in values.items():
        # a line the framework profile knows needs three steps to count; an inferred
        # counter needs five, and must not be the printing rank's number
        if job.event_ids[c] in known:
            continue
        weak = score[c] < (3 if profile.marker_rank(job.templates[c]) == 2 else 5)
        # an error report's advancing fields count packets, retries or offsets
        # ("NCCL WARN NET/IB : Got completion ... len=..."), a communication library's
        # own log its channels, peers and buffers ("NCCL INFO transport/net.cc:1012 ->
        # 3"): not the job's steps
        if (weak or _counts_ranks(sets) or reports_trouble(job.templates[c])
                or LIBRARY_LOG.search(job.templates[c])):
            del score[c]
    if not score:
        return None
    sampling = _samplers(values, score) | _echoes(job, score)
    # nor is a line that named a tenth of the steps another line counted, whatever its
    # words ("validate step: 5025" in a framework whose iteration line says "step: ")
    best = max(score.values())
    sampling |= {c for c, v in score.items() if 10 * v < best}
    # a generic "iteration" word (a save line names its iteration too) breaks ties only:
    # the line that counted many more steps is the one printed every step
    return max(score, key=lambda c: (job.event_ids[c] in known,
                                     c not in sampling,
                                     profile.marker_rank(job.templates[c]) == 2,
                                     score[c] >= 2 * _best_other(score, c),
                                     profile.marker_rank(job.templates[c]), score[c], -c))


_NAME_TOKEN = re.compile(r"[A-Za-z][\w.-]*\d[\w.-]*")


def _roll_calls(job: ParsedJob) -> set[tuple[int, int]]:
    """(node, event) pairs whose advancing number is a host's: the first and the last line
    name two different nodes of the job ("Waiting for host algo-2 to be reachable" ...
    "algo-64"), a launcher calling the roll, not counting steps."""
    names = {t: k for k, node in enumerate(job.nodes) for t in host_tokens(node)}
    out = set()
    for i, mk in enumerate(job.markers):
        for c in mk:
            first = job.examples[i].get(c)
            last = job.last_examples[i].get(c)
            if first is None or last is None:
                continue
            a = {names[t] for t in _NAME_TOKEN.findall(first[1]) if t in names}
            b = {names[t] for t in _NAME_TOKEN.findall(last) if t in names}
            if a and b and a != b:
                out.add((i, c))
    return out


def _samplers(values: dict[int, list[set]], score: dict[int, int]) -> set[int]:
    """Counters that only sample another one: an evaluation or save every 25 steps names
    the step it ran at ("validate step: 5025"), in strides many times the stride of the
    line printed every step, over the same range.  Whatever its words, that line is not
    the step counter while the dense one exists."""
    shape: dict[int, tuple[float, float, float]] = {}
    for c in score:
        nums = np.unique(np.array(sorted(set().union(*values[c])), dtype=np.float64))
        nums = nums[~np.isnan(nums)]
        if nums.size < 2:
            continue
        shape[c] = (float(np.median(np.diff(nums))), float(nums[0]), float(nums[-1]))
    out = set()
    for c, (step, lo, hi) in shape.items():
        for d, (step_d, lo_d, hi_d) in shape.items():
            if (d != c and score[d] >= 3 * score[c] and 5 * step_d <= step
                    and lo_d <= hi and lo <= hi_d):
                out.add(c)
                break
    return out


def _echoes(job: ParsedJob, score: dict[int, int]) -> set[int]:
    """Counters whose every line repeats the count another, denser counter printed last
    on the same node: a log line that quotes the step (a progress bar glued to a loss line
    by the launcher's tee, "validate step: 5025" after "step: 5025").  Sampling the step
    does not make a line the step counter; the line it echoes is."""
    out: set[int] = set()
    for c in score:
        for d in score:
            if d == c or score[d] < 2 * score[c]:
                continue
            hits = total = 0
            for mk in job.markers:
                tc, td = mk.get(c), mk.get(d)
                if tc is None or td is None or not len(td.positions):
                    continue
                order = np.argsort(td.positions, kind="stable")
                dpos, dnum = td.positions[order], td.numbers[order]
                k = np.searchsorted(dpos, tc.positions, side="right") - 1
                ok = k >= 0
                total += int(tc.numbers.size)
                hits += int((dnum[k[ok]] == tc.numbers[ok]).sum())
            if total >= 3 and hits >= 0.9 * total:
                out.add(c)
                break
    return out


def _best_other(score: dict[int, int], c: int) -> int:
    return max((v for k, v in score.items() if k != c), default=0)


def _counts_ranks(per_node: list[set]) -> bool:
    """Is this "counter" the rank of the process that printed the line?  Every rank
    prints its own number once ("[Rank 12] using GPU 4 ..."), so each node shows a short run
    of numbers no other node shows; an iteration counter shows the same numbers wherever
    it is printed."""
    if len(per_node) < 2 or max(len(s) for s in per_node) > 64:
        return False
    return len(set().union(*per_node)) == sum(len(s) for s in per_node)


def same_counter(job: ParsedJob, profile: Profile, stages: list[str | None],
                 marker: int) -> list[int]:
    """``marker`` and the columns that carry on its count: a framework may print its first
    iterations without some field ("throughput" from iteration 10 on), which makes two
    templates of one line.  On every node that prints both, one's numbers end where the
    other's begin."""
    rank = profile.marker_rank(job.templates[marker])
    cols = [marker]
    # a line no profile knows carries on only as itself with a field more or less (a
    # progress bar that shows "val_loss=" once the first validation ran)
    cands = {c for mk in job.markers for c in mk
             if c != marker and stages[c] in (None, "training")
             and profile.marker_rank(job.templates[c]) == rank
             and (rank > 0 or one_field_apart(job.templates[marker], job.templates[c]))}
    for c in sorted(cands):
        both = 0
        for mk in job.markers:
            if marker in mk and c in mk:
                # one ends, in the log and in its count, where the other begins: a line
                # printed among the marker's lines counts something else ("iter 7440:
                # val loss" counts micro-batches between "step 930" lines)
                if not (_continues(mk[marker], mk[c]) or _continues(mk[c], mk[marker])):
                    both = -1
                    break
                both += 1
        if both > 0:
            cols.append(c)
    return cols


def _continues(early, late) -> bool:
    """Whether track ``late`` begins, in the log and in its count, where ``early`` ends.

    The count as printed or as counted: a bar per epoch counts from 1 again in every epoch,
    so "Epoch 1: 182/603" carries on from "Epoch 1: 177/603" although "Epoch 0: 603/603"
    came before it."""
    if not early.positions.size or not late.positions.size:
        return False
    if early.positions.max() >= late.positions.min():
        return False
    a = early.numbers[np.argsort(early.positions, kind="stable")]
    b = late.numbers[np.argsort(late.positions, kind="stable")]
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if not a.size or not b.size:
        return False
    # as counted (epochs added up), or as printed: its first count above the other's last
    # (which also holds whenever every printed count is above every other)
    ca, cb = _counted(early), _counted(late)
    return bool(np.nanmax(ca) < np.nanmin(cb) or a[-1] < b[0])


_TOKEN = re.compile(r"<[A-Z*]+>|\w+|[^\w\s]")


def one_field_apart(a: str, b: str) -> bool:
    """Whether two templates are one line printed with and without some fields: the same
    first tokens, and every token of the shorter in the longer, in order."""
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    short, long_ = (ta, tb) if len(ta) <= len(tb) else (tb, ta)
    if len(short) < 4 or short[:3] != long_[:3] or len(short) == len(long_):
        return False
    it = iter(long_)
    return all(tok in it for tok in short)


def track_arrays(*tracks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions, iterations, times) of marker tracks, joined in record order."""
    return _joined(tracks)[:3]


def _joined(tracks) -> tuple[np.ndarray, ...]:
    """(positions, counts, times, printed durations, line numbers, bar clock) of marker
    tracks, joined in record order, one entry per count."""
    pos = np.concatenate([np.zeros(0, np.int64)] + [t.positions for t in tracks])
    num = np.concatenate([np.zeros(0)] + [_counted(t) for t in tracks])
    ts = np.concatenate([np.zeros(0)] + [t.ts for t in tracks])
    # printed durations and bar clock: nan where none was read; line numbers: 0 where a
    # hand-built track has none
    dur = np.concatenate([np.zeros(0)] + [per_line(t, "durations", len(t.ts)) for t in tracks])
    lines = np.concatenate([np.zeros(0, np.int64)] + [per_line(t, "lines", len(t.ts), 0) for t in tracks])
    el = np.concatenate([np.zeros(0)] + [per_line(t, "elapsed", len(t.ts)) for t in tracks])
    order = np.argsort(pos, kind="stable")
    cols = [pos[order], num[order], ts[order], dur[order], lines[order], el[order]]
    cols[1] = unwrap_periodic(cols[1])
    num = cols[1]
    if len(num) > 1:
        # one iteration printed by several ranks (in any order) or redrawn by a progress
        # bar: keep its last line, the one that ended it, and only lines that advance
        keep = np.isnan(num)
        _, last = np.unique(num[::-1], return_index=True)
        keep[len(num) - 1 - last] = True
        cols = [c[keep] for c in cols]
        num = cols[1]
        ahead = np.isnan(num) | (num >= np.maximum.accumulate(np.where(np.isnan(num), -np.inf, num)))
        cols = [c[ahead] for c in cols]
    return tuple(cols)


def _first_seen(tracks, num: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """For each count of a joined track, the position of its first line (its kept line
    where that is the first)."""
    allpos = np.concatenate([np.zeros(0, np.int64)] + [t.positions for t in tracks])
    allnum = np.concatenate([np.zeros(0)] + [_counted(t) for t in tracks])
    order = np.argsort(allpos, kind="stable")
    allpos, allnum = allpos[order], unwrap_periodic(allnum[order])
    ok = ~np.isnan(allnum)
    vals, idx = np.unique(allnum[ok], return_index=True)
    first_pos = allpos[ok][idx]
    out = pos.copy()
    hit = ~np.isnan(num)
    k = np.searchsorted(vals, num[hit])
    k = np.clip(k, 0, max(len(vals) - 1, 0))
    if len(vals):
        found = vals[k] == num[hit]
        sub = out[hit]
        sub[found] = np.minimum(sub[found], first_pos[k[found]])
        out[hit] = sub
    return out


def _counted(track) -> np.ndarray:
    """A track's counts, with the periods a progress fraction started over added up
    (``MarkerTrack.period``: "Epoch 2: 130/200" is step 2 x 200 + 130; see
    :func:`l4.scan.unwrap_counts`)."""
    period = float(getattr(track, "period", 0.0) or 0.0)
    base = float(getattr(track, "base", 0.0) or 0.0)  # epochs before the first line's
    num = track.numbers
    if num.size < 2:
        return num + base
    order = np.argsort(track.positions, kind="stable")
    if period <= 0:
        # a fraction whose samples did not start over yet ("k/50", first epoch): a period
        # when it later starts over where an epoch does, near its total and back to the
        # start (a job restarted from scratch starts over from wherever it stopped)
        total = float(getattr(track, "total", 0.0) or 0.0)
        if not (total > 0 and _epochs_end_at(num[order], total)):
            return num + base
        period = total
    out = np.empty_like(num)
    out[order] = unwrap_counts(num[order].tolist(), period)
    return out + base


def _epochs_end_at(seq: np.ndarray, total: float) -> bool:
    """Whether counts never past ``total`` start over, each time from near the total
    (a bar drawn every few steps may skip its last counts) to near the start."""
    seq = seq[~np.isnan(seq)]
    if seq.size < 2 or seq.max() > total:
        return False
    drops = np.nonzero(np.diff(seq) < -total / 2)[0]
    return bool(drops.size) and bool(((seq[drops] >= 0.8 * total)
                                      & (seq[drops + 1] <= 0.2 * total)).all())


def unwrap_periodic(num: np.ndarray) -> np.ndarray:
    """A counter that starts over at a fixed period, as one that keeps counting.

    A progress bar per epoch ("Epoch 2: 45%|...| 130/200") counts batches within the epoch
    and starts again at every epoch; the steps the job made are the epochs' counts added
    up.  Only a reset to the counter's first value after at least two periods that ended
    at the same count is read as a period: a job restarted from scratch also starts its
    counter over, at no fixed point, and its iterations are the new run's."""
    ok = ~np.isnan(num)
    vals = num[ok]
    if vals.size < 6:
        return num
    step = counter_step(vals) or 1.0
    start = vals[0]
    resets = np.nonzero((vals[1:] <= start + step) & (vals[:-1] - vals[1:] >= 2 * step))[0] + 1
    if resets.size < 2:
        return num
    bounds = np.concatenate(([0], resets, [vals.size]))
    ends = [float(vals[a:b].max()) for a, b in zip(bounds[:-2], bounds[1:-1], strict=True)]
    if len(set(ends)) != 1:
        return num
    period = ends[0] - start + step  # counts of one period: 1..200 (or 0..199) is 200
    seg = np.searchsorted(resets, np.arange(vals.size), side="right")
    out = num.copy()
    out[ok] = vals + seg * period
    return out


def grid_end(counter: Counter, at: float) -> int | None:
    """The end of the logging interval that holds step ``at``, when ``at`` lies off the
    grid the job printed its counts on (every 50 steps: 9000, 9050, ...) and was printed
    all the same (a "loss is nan at step 9734" report, a count printed when the run
    stopped); ``None`` when it is on the grid or the counts keep no grid.

    Which one names "the iteration of the failure" is a convention: the step itself, or
    the interval the job would have reported it in.  Both are listed."""
    k = counter.step
    if not k or k < 2 or k != int(k) or math.isnan(at):
        return None
    k = int(k)
    nums = np.concatenate([t[1] for t in counter.tracks.values()]) if counter.tracks else np.zeros(0)
    nums = nums[~np.isnan(nums)].astype(np.int64)
    if nums.size < 3:
        return None
    offsets, n = np.unique(nums % k, return_counts=True)
    if n.max() < 0.8 * nums.size:
        return None
    off = int(offsets[n.argmax()])
    a = int(at)
    if a % k == off:
        return None
    return a + (off - a) % k


def counter_step(nums: np.ndarray) -> float | None:
    d = np.diff(nums[~np.isnan(nums)])
    d = d[d > 0]
    return float(np.median(d)) if d.size else None


def dtw_anomalies(seq: np.ndarray, pos: np.ndarray, nums: np.ndarray,
                  rarity: np.ndarray) -> list[tuple[int, float]]:
    """(iteration, z) for iterations whose event sequence departs from the previous WINDOW.

    Events are encoded by rarity (routine per-iteration events ~0, rare ones large), so DTW
    measures "something unusual happened in this iteration".  Identical sequences share one
    code and distances are cached, which keeps thousands of iterations cheap.
    """
    if len(pos) < 3:
        return []
    segs = [seq[(pos[i - 1] + 1 if i else 0): pos[i] + 1] for i in range(len(pos))]
    codes: dict[bytes, int] = {}
    seg_code = [codes.setdefault(s.tobytes(), len(codes)) for s in segs]
    values = {}
    for s, code in zip(segs, seg_code, strict=True):
        if code not in values:
            values[code] = rarity[s].astype(np.double) if s.size else np.zeros(1)
    cache: dict[tuple[int, int], float] = {}

    def dist(a: int, b: int) -> float:
        if a == b:
            return 0.0
        key = (a, b) if a < b else (b, a)
        if key not in cache:
            cache[key] = float(dtw.distance_fast(values[a], values[b], use_pruning=True))
        return cache[key]

    d = np.zeros(len(segs))
    for i in range(1, len(segs)):
        lo = max(0, i - WINDOW)
        d[i] = np.mean([dist(seg_code[i], seg_code[j]) for j in range(lo, i)])
    d = np.nan_to_num(d, nan=0.0, posinf=0.0)
    if len(segs) < 3:
        return []
    padded = np.concatenate((np.full(WINDOW, np.nan), d[1:]))
    ref = sliding_window_view(padded, WINDOW)[: len(segs) - 1]  # ref[k]: d[k-W+1..k], for i=k+1
    ref = ref[1:]  # i = 2 .. len-1
    mu = np.nanmean(ref, axis=1)
    sd = np.nanstd(ref, axis=1)
    z = (d[2:] - mu) / np.maximum(np.maximum(sd, 0.1 * mu), 0.5)
    out = []
    for k in np.nonzero(z > SIGMA)[0].tolist():
        i = k + 2
        if not math.isnan(nums[i]):
            out.append((int(nums[i]), float(z[k])))
    return out


def duration_anomalies(nums: np.ndarray, ts: np.ndarray) -> list[tuple[int, float]]:
    """(iteration, z) for iterations that took abnormally long versus the previous WINDOW."""
    ok = ~np.isnan(ts) & ~np.isnan(nums)
    nums, ts = nums[ok], ts[ok]
    if len(ts) < 4:
        return []
    dur = np.diff(ts)
    start = min(WINDOW // 2, len(dur))  # warm-up iterations are a poor reference
    if len(dur) - start < 1:
        return []
    # reference = the previous WINDOW durations (fewer at the start), vectorised
    padded = np.concatenate((np.full(WINDOW - 1, np.nan), dur))
    win = sliding_window_view(padded, WINDOW)[: len(dur)]  # win[i] ends at dur[i]
    ref = np.vstack((np.full((1, WINDOW), np.nan), win[:-1]))  # previous WINDOW, excl. i
    med = np.nanmedian(ref[start:], axis=1)
    mad = np.nanmedian(np.abs(ref[start:] - med[:, None]), axis=1) * 1.4826
    z = (dur[start:] - med) / np.maximum(np.maximum(mad, 0.1 * np.abs(med)), 1e-3)
    hits = np.nonzero(z > SIGMA)[0]
    return [(int(nums[start + h + 1]), float(z[h])) for h in hits.tolist()]


def suspicious_iterations(job: ParsedJob, cross: CrossJobResult, counter: Counter,
                          focus: list[int], current: float | None,
                          work: Collection[int] = ()) -> dict[int, float]:
    """Iteration -> suspicion: the one in progress at the failure point (``current``),
    slow and unusual iterations on the ``focus`` nodes, and where a slowdown or an alarming
    streak that lasted to the end began.  ``work``: the event columns of evaluations and
    saves (``after_other_work``)."""
    tracks, step = counter.tracks, counter.step
    scores: dict[int, float] = {}

    def bump(it: float, s: float) -> None:
        if it is None or math.isnan(it):
            return
        it = int(it)
        scores[it] = max(scores.get(it, 0.0), s)

    if current is not None:
        bump(current, 5.0)
        bump(current - step, 0.6)
        bump(current + step, 0.5)
    total = job.counts.sum(axis=0).astype(np.float64)
    rarity = np.log1p(total.sum() / np.maximum(total, 1.0)) * (cross.kept + 0.05)
    alarming = cross.severity >= 0.5
    # or new in this job and on few nodes, whatever its words ("NCCL WARN ... port error")
    unusual = alarming | (cross.novel & cross.kept
                          & (cross.anomalous.sum(axis=0) <= max(1, job.n_nodes // 4)))
    first_slow: float | None = None
    sustained = False
    for i in dict.fromkeys(focus):
        if i not in tracks:
            # a node that prints no counter line can still print the same count in words
            # of its own ("iter 2440 | 0.98 s/it" beside rank 0's progress bar): its own
            # alarming lines are placed by that count
            proxy = proxy_track(job, counter, i)
            if proxy is not None:
                began = _began(job, cross, i, proxy[0], proxy[1], alarming, unusual)
                if began is not None and (current is None or began < current):
                    bump(began, 5.5)
            continue
        tpos, tnum, _ = tracks[i]
        tts = counter.clock(i)
        dur = duration_anomalies(tnum, tts)
        if dur:
            neutral = after_other_work(job.seqs[i], tpos, work, counter.firsts.get(i))
            a = _first_run(dur, step, tnum, neutral)
            if a is not None:
                a = slow_onset(tnum, tts, a, COARSE_ONSET_FLOOR if i in counter.coarse else ONSET_FLOOR)
            if a is not None and (first_slow is None or a < first_slow):
                first_slow = a
                sustained = _slow_to_the_end(tnum, tts, a)
            # a step after an evaluation or a save took that phase's time too: no spike
            paused = {float(n) for n in tnum[neutral].tolist()} if neutral.any() else set()
            for it, z in dur:
                if float(it) not in paused:
                    bump(it, _spike(it, z, current, step))
        for it, z in dtw_anomalies(job.seqs[i], tpos, tnum, rarity):
            bump(it, _spike(it, z, current, step))
        began = _began(job, cross, i, tpos, tnum, alarming, unusual)
        if began is not None and (current is None or began < current):
            # every iteration since then said the same alarming thing (an fp16 overflow
            # each step until the loss scale bottoms out): that is where the fault began
            bump(began, 5.5)
    if first_slow is not None and (current is None or first_slow < current):
        # ranked just below the failure point: a slow spell before a crash is either the
        # cause (straggler) or noise, and top-3 keeps both
        # ... unless the job never recovered: then the slowdown is where the fault began
        bump(first_slow, 5.5 if sustained else 4.5)
    # spikes that come back every N iterations are the schedule (an evaluation every 25
    # iterations lengthens every 25th), not a fault: listed after everything else
    for it in _periodic([it for it, sc in scores.items() if sc < 4.5], step):
        scores[it] *= 0.1
    return scores


def _began(job: ParsedJob, cross: CrossJobResult, i: int, tpos: np.ndarray, tnum: np.ndarray,
           alarming: np.ndarray, unusual: np.ndarray) -> int | None:
    """Where node ``i``'s alarming streak, or its recurring unusual spell, began."""
    began = streak_onset(job.seqs[i], tpos, tnum, alarming)
    if began is None:
        # an alarming line the healthy runs print as often (NCCL's "GID table change",
        # a WARN) is their weather, not a fault coming back
        began = recurring_onset(job.seqs[i], tpos, tnum,
                                unusual & (cross.novel | cross.anomalous[i]))
    return began


def proxy_track(job: ParsedJob, counter: Counter, i: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(record positions, counts) of a line node ``i`` prints that counts the job's steps
    in other words than the counter, for a node the counter has no track on; ``None``
    without one.

    The job's counter is the line that counted the most steps on some node, often one
    only rank 0's node prints (a progress bar); the others may still print the count in a
    line of their own.  Such a line's numbers advance at every occurrence, lie inside the
    range the counter printed, and are, mostly, numbers it printed too; the one with the
    most occurrences is taken."""
    ref = np.concatenate([t[1] for t in counter.tracks.values()]) if counter.tracks else np.zeros(0)
    ref = ref[~np.isnan(ref)]
    if ref.size < 3:
        return None
    lo, hi = float(ref.min()) - counter.step, float(ref.max()) + counter.step
    best: tuple[int, np.ndarray, np.ndarray] | None = None
    for c, mk in job.markers[i].items():
        if c in counter.cols:
            continue
        ok = ~np.isnan(mk.numbers)
        nums, pos = mk.numbers[ok], mk.positions[ok]
        if nums.size < PROXY_MIN or np.any(np.diff(nums) <= 0):
            continue
        if ((nums >= lo) & (nums <= hi)).mean() < 0.9 or np.isin(nums, ref).mean() < 0.5:
            continue
        if best is None or nums.size > best[0]:
            best = (int(nums.size), pos, nums)
    return (best[1], best[2]) if best else None


def _spike(it: int, z: float, current: float | None, step: float) -> float:
    """Suspicion of one unusual iteration (a slow one, or one whose events depart from the
    previous WINDOW) that did not last: z / 4, up to 3.

    One that ended more than WINDOW printed counts before the failure, while the job went on
    training normally, did not bring the job down; it stays listed, after the failure's own
    interval and its neighbours (a crash at step 14 429 is not explained by one slow step
    at 2 450, though an SRE may still want to see it).  Where the failure's iteration is not
    known every spike keeps its place."""
    s = min(z, 12.0) / 4.0
    if current is not None and it < current - WINDOW * max(step, 1.0):
        return s * FAR_SPIKE_FACTOR
    return s


def _periodic(its: list[int], step: float) -> set[int]:
    """Members of ``its`` that lie on a run of three or more at one fixed stride (larger
    than the counter's own step)."""
    have = set(its)
    out: set[int] = set()
    ordered = sorted(have)
    strides = {b - a for a, b in zip(ordered, ordered[1:], strict=False) if b - a > step}
    for stride in strides:
        for a in ordered:
            if a - stride in have:
                continue  # not the start of a run
            run = [a]
            while run[-1] + stride in have:
                run.append(run[-1] + stride)
            if len(run) >= 3:
                out.update(run)
    return out


def streak_onset(seq: np.ndarray, pos: np.ndarray, nums: np.ndarray, alarming: np.ndarray,
                 *, look_back: int = 400, min_run: int = 3) -> int | None:
    """First iteration of a streak that lasted to the end: an alarming event that every
    iteration printed from then on, and none of the ``WINDOW`` iterations before it.

    ``pos`` are the counter's record positions on this node, ``nums`` the iterations they
    name; an iteration's events are the records since the previous counter line.
    """
    n = len(pos)
    if n < min_run + 1:
        return None
    lo = max(1, n - look_back)
    segs = [set(seq[pos[k - 1] + 1: pos[k] + 1].tolist()) for k in range(lo, n)]
    tail = segs[-1]
    best = None
    for e in tail:
        if not alarming[e]:
            continue
        k = len(segs) - 1
        while k > 0 and e in segs[k - 1]:
            k -= 1
        run = len(segs) - k
        before = segs[max(0, k - WINDOW): k]
        if run >= min_run and before and not any(e in b for b in before):
            it = nums[lo + k]
            if not math.isnan(it) and (best is None or it < best):
                best = int(it)
    return best


def recurring_onset(seq: np.ndarray, pos: np.ndarray, nums: np.ndarray, alarming: np.ndarray,
                    *, look_back: int = 400, min_hits: int = 3) -> int | None:
    """First iteration of an unusual event that came back again and again until the end,
    though not in every iteration: a link that flaps ("port error", "port active") a few
    times before it fails for good.  Its last spell (after a clean stretch of ``WINDOW``
    iterations) must span ``min_hits`` iterations or more, a third of those from its start
    to the end at least, and last to within ``WINDOW // 2`` iterations of the end; the
    earliest such spell's first iteration is where the fault began."""
    n = len(pos)
    if n < min_hits + 1:
        return None
    lo = max(1, n - look_back)
    segs = [set(seq[pos[k - 1] + 1: pos[k] + 1].tolist()) for k in range(lo, n)]
    tail = set(seq[pos[-1] + 1:].tolist())  # after the last counter line: the failure
    seen: dict[int, list[int]] = {}
    for k, sg in enumerate(segs):
        for e in sg:
            if alarming[e]:
                seen.setdefault(e, []).append(k)
    best = None
    for e, ks in seen.items():
        # the spell that lasted to the end: after the last clean stretch of WINDOW
        gaps = [j for j in range(1, len(ks)) if ks[j] - ks[j - 1] > WINDOW]
        ks = ks[gaps[-1]:] if gaps else ks
        if len(ks) < min_hits or len(segs) - 1 - ks[-1] > WINDOW // 2:
            continue
        if 3 * len(ks) < len(segs) - ks[0]:
            continue  # a stray error now and then (a metrics push), not a spell
        if e in tail and len(ks) == len(segs) - ks[0]:
            continue  # every iteration since: a streak (``streak_onset``) or the failure
        if not gaps and ks[0] < WINDOW:
            continue  # no clean stretch before it to tell it began there
        it = nums[lo + ks[0]]
        if not math.isnan(it) and (best is None or it < best):
            best = int(it)
    return best


def _first_run(dur: list[tuple[int, float]], step: float, nums: np.ndarray | None = None,
               neutral: np.ndarray | None = None) -> float | None:
    """First iteration of a run of three consecutive slow iterations (a slow node shows
    as such a run; a lone spike does not).

    With ``nums`` and ``neutral`` (per counter line: it came after other work of the node,
    ``after_other_work``), those steps neither break a run nor make one: behind a
    straggler, the step after an evaluation or a save is fast (the peers' wait went into
    that phase's collective), and on a clock it is slow by the phase's time."""
    if nums is not None and neutral is not None and len(neutral) == len(nums) and neutral.any():
        slow = {it for it, _ in dur}
        clean = [float(n) for n, nb in zip(nums.tolist(), neutral.tolist(), strict=True)
                 if not nb and n == n]
        for a, b, c in zip(clean, clean[1:], clean[2:], strict=False):
            if a in slow and b in slow and c in slow:
                return a
        return None
    runs = [it for it, _ in dur]
    for a, b, c in zip(runs, runs[1:], runs[2:], strict=False):
        if b - a <= step and c - b <= step:
            return a
    return None


def after_other_work(seq: np.ndarray, pos: np.ndarray, work: Collection[int],
                     firsts: np.ndarray | None = None) -> np.ndarray:
    """Per counter line of a node: did the node, since its previous count, print a line of
    other work (``work``: the event columns of an evaluation's or a save's lines, by the
    stages the profile and the healthy runs give them)?  ``seq``: the node's event column
    of every record; ``pos``: the counter lines' record indices; ``firsts``: where each
    count was printed first (a progress bar redraws its count after an evaluation that
    interrupted it: the evaluation lies between the count's first line and its last)."""
    out = np.zeros(len(pos), dtype=bool)
    work = [c for c in work if c >= 0]
    if len(pos) < 3 or not len(seq) or not work:
        return out
    start = pos if firsts is None or len(firsts) != len(pos) else np.minimum(firsts, pos)
    is_work = np.zeros(int(max(int(seq.max()), max(work))) + 1, dtype=bool)
    is_work[work] = True
    for k in range(1, len(pos)):
        seg = seq[int(start[k - 1]) + 1:int(pos[k])]
        out[k] = bool(seg.size) and bool(is_work[seg].any())
    return out


#: a step is above its node's usual time when it exceeds the usual by this many deviations
ONSET_SIGMA = 3.0
#: the deviation is at least this share of the usual time (clocks and timers jitter)
ONSET_FLOOR = 0.01
#: ... and this share on a coarse clock (``Counter.coarse``): a bar's smoothed speed dips
#: by a few percent when an epoch's bar starts over, which is no slowdown
COARSE_ONSET_FLOOR = 0.10


def slow_onset(nums: np.ndarray, ts: np.ndarray, start: float, floor: float = ONSET_FLOOR) -> float:
    """Where the slowdown that the 3-sigma rule first saw at ``start`` began: the earliest
    step of the unbroken run of steps, ending there, that each took longer than the
    node's usual time (the median of the ``WINDOW`` steps before that step, plus
    ``ONSET_SIGMA`` of their deviation).

    A throttling device slows by 13 %, then 30 %, then 50 %: the 3-sigma rule, with its
    10 % floor against jitter, first fires at 50 %; the fault began at 13 %, and a node
    whose steps vary by 0.2 % shows that plainly.
    """
    ok = ~np.isnan(nums) & ~np.isnan(ts)
    nums, ts = nums[ok], ts[ok]
    if len(ts) < 4:
        return start
    dur, it = np.diff(ts), nums[1:]
    hits = np.nonzero(it == start)[0]
    if not hits.size:
        return start
    j = int(hits[0])
    while j > 0:
        before = dur[max(0, j - 1 - WINDOW):j - 1]
        if before.size < 3:
            break
        med = float(np.median(before))
        mad = float(np.median(np.abs(before - med))) * 1.4826
        if not dur[j - 1] > med + ONSET_SIGMA * max(mad, floor * abs(med)):
            break
        j -= 1
    return float(it[j])


def slowed_first(job: ParsedJob, counter: Counter | None) -> np.ndarray:
    """Per node: 1 for the one node whose iterations turned slow (and stayed slow) before
    every other counting node's did.

    In step-locked training a node that is slow after a collective (host work, data, a
    throttled device) prints its own step late first; its peers wait for it at the next
    collective and slow down one step later.  When all turn slow at the same step nothing
    is told apart.
    """
    out = np.zeros(job.n_nodes)
    if counter is None or len(counter.tracks) < 3:
        return out
    first: dict[int, float] = {}
    for i, (_, tnum, _) in counter.tracks.items():
        tts = counter.clock(i)
        dur = duration_anomalies(tnum, tts)
        a = _first_run(dur, counter.step) if dur else None
        if a is not None and _slow_to_the_end(tnum, tts, a):
            first[i] = a
    if len(first) < 3:
        return out
    order = sorted(first, key=first.get)
    lead, rest = order[0], [first[i] for i in order[1:]]
    if first[lead] + counter.step <= min(rest):
        out[lead] = 1.0
    return out


def stopped_counting_first(n_nodes: int, counter: Counter | None) -> np.ndarray:
    """Per node: 1 for the one counting node whose last count is behind every other
    counting node's, when those others ended on the same count (within one step).

    Step-locked training cannot run ahead of a rank that stopped: its peers finish at
    most the step they were in and then wait in the next collective.  So the node that
    died, hung or was killed is the one whose counter stopped short, whatever its log
    says (often nothing) and whatever the peers' errors say (often more, and earlier).
    No clock is needed.  Needs three counting nodes: with two, either may be behind.
    """
    out = np.zeros(n_nodes)
    if counter is None:
        return out
    last = counter.last_counts(min_len=2)
    if len(last) < 3:
        return out
    order = sorted(last, key=last.get)
    low, rest = order[0], [last[i] for i in order[1:]]
    step = max(counter.step, 1.0)
    if max(rest) - min(rest) <= step and last[low] + step <= min(rest):
        out[low] = 1.0
    return out


def _slow_to_the_end(nums: np.ndarray, ts: np.ndarray, start: float) -> bool:
    """Did iterations stay at least twice as slow as before from ``start`` to the end of the
    track?  (The 3-sigma rule stops flagging a slowdown once the window is full of it.)"""
    ok = ~np.isnan(nums) & ~np.isnan(ts)
    nums, ts = nums[ok], ts[ok]
    if len(ts) < 4:
        return False
    dur, it = np.diff(ts), nums[1:]
    before, after = dur[it < start], dur[it >= start]
    before = before[-WINDOW:]
    if before.size < 2 or after.size < 2:
        return False
    # the last few, not the very last: a line flushed as the job is torn down comes fast
    tail = float(np.median(after[-3:]))
    return bool(np.median(after) > 2.0 * np.median(before) and tail > 2.0 * np.median(before))


def iteration_at(job: ParsedJob, counter: Counter, r: int, point: tuple[int, int | None, float],
                 cross: CrossJobResult) -> float | None:
    """Number of the iteration in progress at node ``r``'s failure point ``point``
    (``l4.onset.onset``).

    From the node's own counter lines; from the pack's when it prints none, or when the
    pack had completed one or two more (a node that is killed loses the output it had not
    flushed, while peers held in step by collectives logged on).  An error that names the
    iteration it failed in ("Loss is nan at iteration 44") has the last word.
    """
    own = _own_progress(counter, r, point[0])
    pack = _pack_progress(job, counter, r, point[2], cross)
    current = own
    if own is None or (pack is not None and own < pack <= own + 2 * counter.step):
        current = pack
    named = _named_iteration(job, cross, r, current, counter.step)
    return named if named is not None else current


def last_count_time(counter: Counter) -> float:
    """When any node last printed a count (nan: no count carries a clock)."""
    times = [tts[~np.isnan(tts)] for _, _, tts in counter.tracks.values()]
    times = [t for t in times if t.size]
    return float(max(t.max() for t in times)) if times else math.nan


def _own_progress(counter: Counter, r: int, pos: int) -> float | None:
    if r not in counter.tracks:
        return None
    tpos, tnum, _ = counter.tracks[r]
    tpos = counter.firsts.get(r, tpos)
    done = tnum[tpos < pos]
    done = done[~np.isnan(done)]
    if done.size:
        return float(done[-1] + counter.step)
    if tnum.size and not np.isnan(tnum).all():
        return float(np.nanmin(tnum))
    return None


#: distinct counts a counter must print to show the job had entered its loop: every rank
#: takes part in each step's collectives, so two counts mean all of them were training
MIN_ADVANCED = 2


def advanced(nums: np.ndarray) -> bool:
    """Did a node's counter print at least ``MIN_ADVANCED`` distinct counts (nan: none)?"""
    return len(np.unique(nums[~np.isnan(nums)])) >= MIN_ADVANCED


def _pack_progress(job: ParsedJob, counter: Counter, r: int, t0: float,
                   cross: CrossJobResult) -> float | None:
    """The iteration the other counting nodes were in when their own trouble began.

    Collectives keep ranks in step, so the iterations a counting node completed before its
    own trouble began are the ones the job completed; that needs no clocks, which disagree
    between nodes by seconds (an iteration or two).  Clocks only when the counting node's
    own log cannot tell.
    """
    best = None
    for i, (tpos, tnum, tts) in counter.tracks.items():
        if i == r:
            continue
        # a count is done once its first line is out: a bar redrawn after the node's
        # trouble began (tqdm closes its bar as the process dies) is no later progress
        tpos = counter.firsts.get(i, tpos)
        ok = ~np.isnan(tnum)
        if not ok.any():
            continue
        p_i, _, _ = onset(job, cross, i)
        done = tnum[ok & (tpos < p_i)]
        after = tnum[ok & (tpos >= p_i)]
        if not done.size and advanced(after):
            # its first unusual line was no trouble if its counter advanced past it (a
            # warning a fresh run prints at step 1 that the resumed healthy runs never
            # printed): its trouble came after its last count
            done = after
        if done.size:
            cand = float(done[-1] + counter.step)
        elif not math.isnan(t0) and (~np.isnan(tts)).any():
            after = tnum[ok & (tts > t0)]
            cand = float(after[0]) if after.size else float(tnum[ok][-1] + counter.step)
        else:
            cand = float(tnum[ok][0])
        best = cand if best is None else min(best, cand)
    return best


_NAMES_ITERATION = re.compile(r"\b(?:iter(?:ation)?|step|batch)\b\s*[:=#]?\s*(\d+)\b", re.I)


def _named_iteration(job: ParsedJob, cross: CrossJobResult, r: int, current: float | None,
                     step: float) -> float | None:
    """The iteration node ``r``'s first errors name, when it is near the one the counter
    says was in progress (a number far from it is something else: a retry count)."""
    if current is None:
        return None
    anom = np.nonzero(cross.anomalous[r] & (cross.severity >= 0.5))[0]
    for c in sorted(anom.tolist(), key=lambda c: job.first_pos[r, c])[:6]:
        ex = job.examples[r].get(c)
        if ex is None:
            continue
        for m in _NAMES_ITERATION.finditer(ex[1]):
            n = float(m.group(1))
            if abs(n - current) <= 2 * step:
                return n
    return None
