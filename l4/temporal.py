"""Temporal comparison: the stage the job failed in and the iterations where it went wrong.

* **Stage**: each event is classified by the framework profile's rules (data, see
  ``l4.profiles``); a node's stage at a point of its log is that of the last classified event
  before it (once training has begun, start-up stages cannot come back).  The failure point
  is where the culprit's first unusual event is (or where its log ends, for a silent crash);
  an error's own wording can refine the stage (``error_hints``).  What other ranks
  announced fills in what the culprit did not print: a save or evaluation for the
  iteration last completed (matched by its number: node clocks disagree by seconds), an
  evaluation the schedule says was due, the end of training.
* **Iterations**: the step counter is found from the data (a template whose number advances
  by a fixed step, see ``l4.scan``), so unknown formats work; the profile only breaks ties.
  Each iteration's event sequence is compared by DTW with the preceding ``WINDOW`` ones and
  flagged by the 3-sigma rule, as in the paper; iteration durations are checked the same way
  (slow node, hang).  The iteration that matters is the first that did not complete
  normally: the one in progress at the failure point, or where a slowdown or an alarming
  streak that lasted to the end began.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from dtaidistance import dtw
from numpy.lib.stride_tricks import sliding_window_view

from l4.crossjob import CrossJobResult
from l4.mask import numbers_in
from l4.merge import ParsedJob
from l4.profiles import EARLY, Profile, choose_profile
from l4.spatial import NodeScore

WINDOW = 10
_ORDER = ("initialization", "data_loading", "model_loading", "training", "checkpointing",
          "evaluation", "finalization")
SIGMA = 3.0


@dataclass
class TemporalResult:
    stage: str
    profile: str
    onset_node: str | None
    onset_line: int | None
    iterations: list[tuple[int, float]] = field(default_factory=list)
    marker_template: str | None = None
    step: float | None = None
    notes: list[str] = field(default_factory=list)


def event_stages(job: ParsedJob, profile: Profile) -> list[str | None]:
    return [profile.stage_of(t) for t in job.templates]


def stage_at(seq: np.ndarray, pos: int, stages: list[str | None]) -> str | None:
    """Stage of a node just before record ``pos`` (see module docstring).

    Stages only move forward at the ends: once training has begun, start-up stages cannot
    come back, and once the job has announced the end of training, the final save and
    teardown that follow are still finalization.
    """
    current: str | None = None
    trained = False
    for c in seq[: max(pos, 0)].tolist():
        st = stages[c]
        if st is None:
            continue
        if st == "training":
            trained = True
        if trained and st in EARLY:
            continue
        if current == "finalization":
            break
        current = st
    return current


def time_near(job: ParsedJob, r: int, line: int) -> float:
    """Clock time of line ``line`` of node ``r`` when that line carries none (traceback
    text, srun messages): the time of the nearest line of the node whose time is known.

    The first and last occurrence of every event are such points, so this needs no
    per-line index; a line before wins a tie (it cannot be later than the failure).
    """
    lines = np.concatenate((job.first_line[r], job.last_line[r]))
    ts = np.concatenate((job.first_ts[r], job.last_ts[r]))
    ok = (lines > 0) & ~np.isnan(ts)
    if not ok.any():
        return math.nan
    lines, ts = lines[ok], ts[ok]
    dist = np.abs(lines - line) * 2 + (lines > line)
    return float(ts[int(np.argmin(dist))])


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


def choose_marker(job: ParsedJob, profile: Profile, stages: list[str | None]) -> int | None:
    """The event column that counts iterations.

    The framework's own iteration line first, then any line the generic rules call an
    iteration line, then the counter that counted the most distinct steps on one node.
    Distinct steps, not lines: eight local ranks printing "[Rank 3] (after 1000
    iterations)" once each make a counter of ranks, not of progress.
    """
    score: dict[int, int] = {}
    values: dict[int, list[set]] = {}
    for mk in job.markers:
        for c, track in mk.items():
            if stages[c] not in (None, "training"):
                continue  # save/eval counters, shard and dataset progress bars
            seen = {row[0] for row in track.numbers if row}
            score[c] = max(score.get(c, 0), len(seen))
            values.setdefault(c, []).append(seen)
    for c, sets in values.items():
        # a line the framework profile knows needs three steps to count; an inferred
        # counter needs five, and must not be the printing rank's number
        weak = score[c] < (3 if profile.marker_rank(job.templates[c]) == 2 else 5)
        if weak or _counts_ranks(sets):
            del score[c]
    if not score:
        return None
    return max(score, key=lambda c: (profile.marker_rank(job.templates[c]), score[c], -c))


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
    if rank == 0:
        return cols
    cands = {c for mk in job.markers for c in mk
             if c != marker and stages[c] in (None, "training")
             and profile.marker_rank(job.templates[c]) == rank}
    for c in sorted(cands):
        both = 0
        for mk in job.markers:
            if marker in mk and c in mk:
                a = [row[0] for row in mk[marker].numbers if row]
                b = [row[0] for row in mk[c].numbers if row]
                if not a or not b or not (max(a) < min(b) or max(b) < min(a)):
                    both = -1
                    break
                both += 1
        if both > 0:
            cols.append(c)
    return cols


def _track_arrays(*tracks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pos = np.asarray([p for t in tracks for p in t.positions], dtype=np.int64)
    num = np.asarray([row[0] if row else np.nan for t in tracks for row in t.numbers],
                     dtype=np.float64)
    ts = np.asarray([x for t in tracks for x in t.ts], dtype=np.float64)
    order = np.argsort(pos, kind="stable")
    pos, num, ts = pos[order], num[order], ts[order]
    if len(num) > 1:
        # one iteration printed by several ranks / redrawn by a progress bar: keep the last
        keep = np.append(num[1:] != num[:-1], True)
        pos, num, ts = pos[keep], num[keep], ts[keep]
    return pos, num, ts


def _step(nums: np.ndarray) -> float | None:
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


def analyze(job: ParsedJob, cross: CrossJobResult, ranked: list[NodeScore]) -> TemporalResult:
    """Stage and suspicious iterations of a failed job (see module docstring)."""
    profile = choose_profile(job.templates, job.framework)
    stages = event_stages(job, profile)
    if not ranked:
        return TemporalResult("unknown", profile.name, None, None)
    row = {n: i for i, n in enumerate(job.nodes)}
    r = row[ranked[0].node]
    pos, line, t0 = onset(job, cross, r)
    stage, hinted = failure_stage(job, cross, profile, stages, r, pos, line, t0)

    marker = choose_marker(job, profile, stages)
    if marker is None:
        result = TemporalResult(stage, profile.name, job.nodes[r], line)
        result.notes.append("no iteration counter found")
        return result
    counter = same_counter(job, profile, stages, marker)
    tracks = {i: _track_arrays(*[mk[c] for c in counter if c in mk])
              for i, mk in enumerate(job.markers) if any(c in mk for c in counter)}
    steps = [s for s in (_step(t[1]) for t in tracks.values()) if s]
    step = float(np.median(steps)) if steps else 1.0
    # the iteration in progress at the failure point
    current = _iteration_at(job, tracks, r, pos, t0, step, cross)
    if hinted is None and stage in _LOOP and current is not None:
        # which phase had begun after the last completed iteration, by the numbers the
        # announcements carry (clocks of different nodes disagree by seconds); failing
        # that, whether the job stopped where its schedule says it validates
        after = _phase_after(job, profile, stages, current - step)
        if after is None and stage == "training":
            after = _scheduled_phase(job, profile, current - step)
        stage = after or stage
    result = TemporalResult(stage, profile.name, job.nodes[r], line)
    result.marker_template = job.templates[marker]
    result.step = step
    if stage in _LOOP or stage == "finalization":  # a start-up failure has no iteration
        focus = [row[s.node] for s in ranked[:3]] + list(tracks)[:3]
        scores = suspicious_iterations(job, cross, tracks, step, focus,
                                       current if stage in _LOOP else None)
        result.iterations = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
    return result


def failure_stage(job: ParsedJob, cross: CrossJobResult, profile: Profile,
                  stages: list[str | None], r: int, pos: int, line: int | None,
                  t0: float) -> tuple[str, str | None]:
    """(stage, stage the error's own words name or ``None``) of a failure that began at
    record ``pos`` of node ``r``, before iteration numbers are consulted."""
    stage = stage_at(job.seqs[r], pos, stages)
    # the error's own words, and the code its traceback went through, may place it more
    # precisely (a failed torch.save is checkpointing, an OOM inside evaluate() evaluation)
    anom = np.nonzero(cross.anomalous[r] & (cross.severity >= 0.5))[0]
    first_errs = sorted(anom.tolist(), key=lambda c: job.first_pos[r, c])[:6]
    progressed = _progressed(job, cross, choose_marker(job, profile, stages))
    hinted = None
    for c in first_errs:
        ex = job.examples[r].get(c)
        text = job.templates[c] + "\n" + "\n".join(ex[2] if ex else [])
        hinted = profile.hint_of(text)
        if hinted:
            break
    if hinted and not (progressed and hinted in EARLY):
        stage = hinted
    # an error line without a clock of its own (traceback text, srun) happened about when
    # the lines around it did.  That rough time only fills in what the culprit's own log
    # cannot tell (a save or evaluation rank 0 announced)
    rough = math.isnan(t0) and line is not None
    t_stage = time_near(job, r, line) if rough else t0
    timed = _stage_by_time(job, stages, t_stage)
    if rough and timed is not None and not (
        stage is None or (stage == "training" and timed not in EARLY)
    ):
        timed = None
    if hinted is None and timed is not None and not (
        stage not in EARLY and stage is not None and timed in EARLY
    ):
        # the job-wide latest stage transition before the failure (rank 0 announces saves,
        # the last rank iterations, the culprit maybe nothing at all).  Start-up stages
        # print few timestamps, so between two of them the one the job reaches later wins
        if stage in EARLY and timed in EARLY:
            order = _startup_order(job, stages)
            stage = max((stage, timed), key=lambda st: order.get(st, -1))
        else:
            stage = timed
    if hinted is None and (stage is None or stage in EARLY):
        # the culprit may print no progress lines of its own (only some ranks log
        # iterations): if the rest of the job was already past start-up, so was the job
        pack = _pack_stage(job, cross, stages, r, t_stage)
        if pack is not None and (stage is None or _ORDER.index(pack) > _ORDER.index(stage)):
            stage = pack
    if stage is None:
        stage = "initialization"
    if stage in _LOOP and _training_finished(job, cross, stages):
        stage = "finalization"
    if stage == "checkpointing" and _final_save(job, stages):
        stage = "finalization"
    return stage, hinted


def suspicious_iterations(job: ParsedJob, cross: CrossJobResult, tracks: dict, step: float,
                          focus: list[int], current: float | None) -> dict[int, float]:
    """Iteration -> suspicion: the one in progress at the failure point (``current``),
    slow and unusual iterations on the ``focus`` nodes, and where a slowdown or an alarming
    streak that lasted to the end began."""
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
    first_slow: float | None = None
    sustained = False
    for i in dict.fromkeys(focus):
        if i not in tracks:
            continue
        tpos, tnum, tts = tracks[i]
        dur = duration_anomalies(tnum, tts)
        if dur:
            runs = [it for it, _ in dur]
            # a slow node shows as a run of consecutive slow iterations; take its first
            for a, b, c in zip(runs, runs[1:], runs[2:], strict=False):
                if b - a <= step and c - b <= step:
                    if first_slow is None or a < first_slow:
                        first_slow = a
                        sustained = _slow_to_the_end(tnum, tts, a)
                    break
            for it, z in dur:
                bump(it, min(z, 12.0) / 4.0)
        for it, z in dtw_anomalies(job.seqs[i], tpos, tnum, rarity):
            bump(it, min(z, 12.0) / 4.0)
        began = streak_onset(job.seqs[i], tpos, tnum, alarming)
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


_LOOP = ("training", "checkpointing", "evaluation")


def _training_finished(job: ParsedJob, cross: CrossJobResult, stages: list[str | None]) -> bool:
    """Had any node announced the end of training (healthy-looking finalization lines after
    its own training lines) before its own trouble began?  Collectives keep ranks in step,
    so then the whole job was past its last iteration: a save or crash now is final."""
    fin = np.array([st == "finalization" for st in stages], dtype=bool)
    train = np.array([st == "training" for st in stages], dtype=bool)
    if not fin.any() or not train.any():
        return False
    for i in range(job.n_nodes):
        first = job.first_pos[i]
        seen_train = first[train & (first >= 0)]
        if not seen_train.size:
            continue
        p_i, _, _ = onset(job, cross, i)
        ok = fin & ~cross.anomalous[i] & (first > seen_train.min()) & (first < p_i)
        if ok.any():
            return True
    return False


def _startup_order(job: ParsedJob, stages: list[str | None]) -> dict[str, int]:
    """Start-up stages in the order this job goes through them (Megatron builds the model
    before its datasets, DeepSpeed scripts the other way round), read from the node that
    logs most of them.  A stage's place is where its last line is: a dataset helper
    compiled during initialization does not make data loading come first."""
    cols = [c for c, st in enumerate(stages) if st in EARLY]
    if not cols:
        return {}
    seen = (job.counts[:, cols] > 0).sum(axis=1)
    i = int(np.argmax(seen))
    train = [c for c, st in enumerate(stages) if st == "training" and job.counts[i, c] > 0]
    start = int(job.first_line[i, train].min()) if train else None
    last: dict[str, int] = {}
    for c in cols:
        if job.counts[i, c] > 0:
            at = int(job.last_line[i, c])
            if start is not None and at > start:  # also logged during training
                at = int(job.first_line[i, c])
            last[stages[c]] = max(last.get(stages[c], 0), at)
    return {st: k for k, st in enumerate(sorted(last, key=last.get))}


def _phase_after(job: ParsedJob, profile: Profile, stages: list[str | None],
                 last_done: float) -> str | None:
    """The evaluation or save announced for iteration ``last_done`` that never finished.

    "saving checkpoint at iteration 100" after "iteration 100/..." means the job was saving
    when it died, unless the same node then printed a line that ends the phase ("successfully
    saved ...").  Compared by line order on one node, so clock skew cannot reorder them.
    Evaluation comes first: frameworks evaluate, then save, after the same iteration.
    """
    if last_done is None or math.isnan(last_done) or last_done <= 0:
        return None
    target = float(int(last_done))
    resume = [c for c, t in enumerate(job.templates) if profile.is_resume(t)]
    for phase in ("evaluation", "checkpointing"):
        cols = [c for c, st in enumerate(stages) if st == phase]
        for i in range(job.n_nodes):
            for c in cols:
                text = job.last_examples[i].get(c)
                if not text or job.counts[i, c] == 0 or target not in numbers_in(text):
                    continue
                started = job.last_line[i, c]
                if not any(job.last_line[i, rc] > started for rc in resume):
                    return phase
    return None


def _scheduled_phase(job: ParsedJob, profile: Profile, last_done: float) -> str | None:
    """The periodic phase (evaluation, save) due right after iteration ``last_done``.

    Some frameworks announce an evaluation only when it ends ("validation loss at
    iteration 50"); the iterations those lines name give the schedule (every 25), so a
    job that stopped after completing iteration 75 without its report was validating.
    The first and last report and how many there were are enough to read the schedule.
    """
    if last_done is None or math.isnan(last_done) or last_done <= 0:
        return None
    done = int(last_done)
    for stage, rx in profile.periodic:
        for c, template in enumerate(job.templates):
            if not rx.search(template):
                continue
            for i in np.nonzero(job.counts[:, c] >= 2)[0].tolist():
                if c not in job.examples[i] or c not in job.last_examples[i]:
                    continue
                a = numbers_in(job.examples[i][c][1])
                b = numbers_in(job.last_examples[i][c])
                pair = next(((x, y) for x, y in zip(a, b, strict=False)
                             if 0 < x < y and x == int(x) and y == int(y)), None)
                if pair is None or len(a) != len(b):
                    continue
                first, last = int(pair[0]), int(pair[1])
                k = int(job.counts[i, c])
                every = math.gcd(first, last)
                if (last - first) % (k - 1) == 0:
                    every = math.gcd(every, (last - first) // (k - 1))
                if every > 1 and done > last and done % every == 0:
                    return stage
    return None


def _final_save(job: ParsedJob, stages: list[str | None]) -> bool:
    """Was the save that failed the end-of-training one?  Periodic saves fall on a round grid
    (every 100 or 500 iterations); the final save happens wherever training stopped."""
    for i in range(job.n_nodes):
        for c, last in job.last_examples[i].items():
            if stages[c] != "checkpointing" or job.counts[i, c] < 2 or c not in job.examples[i]:
                continue
            # numbers the message carries (iteration, step), never the clock's digits
            first = [int(x) for x in numbers_in(job.examples[i][c][1]) if x == int(x)]
            final = [int(x) for x in numbers_in(last) if x == int(x)]
            if len(first) != len(final):
                continue
            for a, b in zip(first, final, strict=True):
                # save intervals are round numbers; where training ends need not be
                if 10 <= a < b and a % 10 == 0 and b % 10 != 0:
                    return True
    return False


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
    return bool(np.median(after) > 2.0 * np.median(before) and after[-1] > 2.0 * np.median(before))


def _progressed(job: ParsedJob, cross: CrossJobResult, marker: int | None) -> bool:
    """Had any node completed a training iteration (printed its counter) before its own
    trouble began?  Until then a failure can still belong to a start-up stage."""
    if marker is None:
        return False
    for i in range(job.n_nodes):
        p_i, _, _ = onset(job, cross, i)
        if 0 <= job.first_pos[i, marker] < p_i:
            return True
    return False


def _stage_by_time(job: ParsedJob, stages: list[str | None], t0: float) -> str | None:
    """Stage of the latest stage-marking event, on any node, that happened by ``t0``.

    Uses first/last timestamps per node and event: an event that started before ``t0`` and
    was still being logged after it counts as active at ``t0``.  ``None`` without clocks.
    """
    if math.isnan(t0):
        return None
    cols = [c for c, st in enumerate(stages) if st is not None]
    if not cols:
        return None
    first = job.first_ts[:, cols]
    last = job.last_ts[:, cols]
    last = np.where(np.isnan(last), first, last)
    started = first <= t0 + 1.0
    eff = np.where(started, np.minimum(last, t0), -np.inf)
    if not np.isfinite(eff).any():
        return None
    best = np.nanmax(eff)
    if best == -np.inf:
        return None
    # several stages active at t0 (periodic saves span it too): training is the usual state
    hits = {stages[cols[j]] for j in np.nonzero(np.isclose(eff, best, rtol=0.0, atol=0.5).any(axis=0))[0]}
    for st in ("training", "finalization", "checkpointing", "evaluation",
               "model_loading", "data_loading", "initialization"):
        if st in hits:
            return st
    return None


def _pack_stage(job, cross, stages, r, t0) -> str | None:
    """Most common stage of the other nodes just before their own trouble began, counting
    only nodes whose first training line predates the culprit's failure when clocks tell."""
    votes: dict[str, int] = {}
    train_cols = [c for c, st in enumerate(stages) if st == "training"]
    for i in range(job.n_nodes):
        if i == r:
            continue
        p_i, _, _ = onset(job, cross, i)
        st = stage_at(job.seqs[i], p_i, stages)
        if st is None:
            continue
        if st not in EARLY and not math.isnan(t0) and train_cols:
            seen = job.first_ts[i, train_cols]
            seen = seen[~np.isnan(seen)]
            if seen.size and seen.min() > t0:
                continue
        votes[st] = votes.get(st, 0) + 1
    if not votes:
        return None
    # nodes that print progress know more than nodes that print none; before training the
    # pack moves in lock-step, so the furthest start-up stage any node reached is the job's
    later = {k: v for k, v in votes.items() if k not in EARLY}
    if later:
        # saves and evaluations are announced by one rank only; the others just see training
        announced = {k: v for k, v in later.items() if k != "training"}
        pool = announced or later
        return max(pool, key=lambda k: (pool[k], k))
    order = ("initialization", "data_loading", "model_loading")
    return max(votes, key=order.index)


def _iteration_at(job, tracks, r, pos, t0, step, cross) -> float | None:
    """Number of the iteration in progress at the culprit's failure point."""
    if r in tracks:
        tpos, tnum, _ = tracks[r]
        done = tnum[tpos < pos]
        done = done[~np.isnan(done)]
        if done.size:
            return float(done[-1] + step)
        if tnum.size:
            return float(np.nanmin(tnum))
        return None
    # the culprit prints no counter (e.g. only the last rank does): the pack's progress.
    # Collectives keep ranks in step, so the iterations a counting node completed before
    # its own trouble began are the ones the job completed; that needs no clocks, which
    # disagree between nodes by seconds (an iteration or two).  Clocks only when the
    # counting node's own log cannot tell.
    if not tracks:
        return None
    best = None
    for i, (tpos, tnum, tts) in tracks.items():
        ok = ~np.isnan(tnum)
        if not ok.any():
            continue
        p_i, _, _ = onset(job, cross, i)
        done = tnum[ok & (tpos < p_i)]
        if done.size:
            cand = float(done[-1] + step)
        elif not math.isnan(t0) and (~np.isnan(tts)).any():
            after = tnum[ok & (tts > t0)]
            cand = float(after[0]) if after.size else float(tnum[ok][-1] + step)
        else:
            cand = float(tnum[ok][0])
        best = cand if best is None else min(best, cand)
    return best
