"""Learned phase timelines: what healthy runs of the same configuration printed, and in
which order.

A framework profile names stages by wording; a job from a framework, a launcher or a site
that no profile knows words things differently.  Every healthy run of the same
configuration, however it words things, shows the same shape: start-up lines in a fixed
order, then a loop in which the iteration counter advances, then the end.  From the
baselines this module learns, per event:

* its **phase**: start-up (first printed before the first iteration line), loop (between the
  first and the last one) or end (only after the last one);
* for start-up events, their **place** in the healthy start-up order (0 = first, 1 = just
  before training);
* a **stage** name: the profile's word where it names a stage that fits the phase (a
  "validation set: 1000 samples" line before training is data, not evaluation), otherwise
  that of the nearest named event before it in the healthy order.

A failed job is then placed on that timeline: the last healthy start-up event the culprit
printed before its failure, and the first one it never reached, bracket where it stopped.
Nothing here depends on a framework's wording beyond the profile's stage words.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from l4 import gaps as gaps_
from l4.crossjob import normal_rows
from l4.declared import agreed_totals, learn_totals
from l4.iterations import LIBRARY_LOG, Counter, find_counter
from l4.mask import digit_runs
from l4.merge import ParsedJob
from l4.oddwords import job_words
from l4.profiles import EARLY, choose_profile
from l4.schedule import Schedule, schedules
from l4.severity import has_words
from l4.unnumbered import densify

STARTUP, LOOP_PHASE, END = "startup", "loop", "end"
_LOOP_STAGES = ("training", "checkpointing", "evaluation")
@dataclass
class Timeline:
    """What healthy runs of one configuration printed, keyed by template-store cluster id."""

    phase: dict[int, str] = field(default_factory=dict)
    place: dict[int, float] = field(default_factory=dict)  # start-up events: 0..1
    stage: dict[int, str] = field(default_factory=dict)
    templates: dict[int, str] = field(default_factory=dict)
    share: dict[int, float] = field(default_factory=dict)  # of healthy nodes printing it
    named: dict[int, str] = field(default_factory=dict)  # start-up stage its own words name
    counters: set[int] = field(default_factory=set)  # what counted the healthy runs' steps
    # counter -> the first count the healthy runs printed (a resumed run's first step): the
    # step a job was in when it died before printing any (``first_step``)
    first_counts: dict[int, float] = field(default_factory=dict)
    # an unnumbered loop line -> (the step of its first occurrence, steps per line, the
    # numbered line that paced it) in healthy runs (``l4.unnumbered.densify``): a job that
    # numbers too few of its steps to count them is counted by how many of these lines it
    # printed (``paced_steps``)
    paces: dict[int, tuple[float, float, int]] = field(default_factory=dict)
    # event -> the words healthy nodes printed in it (``l4.oddwords``): a routine line in
    # which the culprit alone names something new
    words: dict[int, frozenset[str]] = field(default_factory=dict)
    # save or evaluation announcement -> the lines that end it in healthy runs
    closers: dict[int, set[int]] = field(default_factory=dict)
    # periodic phases the healthy runs reported, with their grids (``l4.schedule``)
    schedules: list[Schedule] = field(default_factory=list)
    # what the healthy runs printed between iterations, and where they ended (``l4.gaps``)
    gaps: gaps_.Gaps | None = None
    # start-up line -> which of its numbers is the run's planned last step, as every
    # healthy run that printed it had it (``l4.declared``)
    totals: dict[int, int] = field(default_factory=dict)
    jobs: int = 0

    def startup_ids(self) -> set[int]:
        """The events healthy runs printed before their counter started, and not after."""
        return {cid for cid, ph in self.phase.items() if ph == STARTUP}

    def closed(self, job: ParsedJob, r: int, col: int, pos: int) -> bool:
        """Did node ``r`` print, after its last ``col`` (a save or evaluation announcement)
        before record ``pos``, a line that ends that phase in healthy runs?"""
        ends = self.closers.get(int(job.event_ids[col]))
        if not ends:
            return False
        seq = job.seqs[r][: max(pos, 0)]
        at = np.nonzero(seq == col)[0]
        if not at.size:
            return False
        ids = np.asarray(job.event_ids)[seq[int(at[-1]) + 1:]]
        return bool(np.isin(ids, list(ends)).any())

    def ends_a_phase(self, job: ParsedJob, col: int) -> bool:
        """Is event ``col`` the line that ends a save or an evaluation in healthy runs
        ("eval: iteration 25 val_loss=2.15" after "running evaluation at iteration 25")?
        Its own words may name the phase; printed, it says that phase is over."""
        return int(job.event_ids[col]) in self.closing_ids()

    def closing_ids(self) -> set[int]:
        """Every line that ends some save or evaluation in healthy runs."""
        return set().union(*self.closers.values()) if self.closers else set()

    def relabel(self, job: ParsedJob, stages: list[str | None],
                counter: Counter | None = None) -> list[str | None]:
        """The job's per-column stages, corrected by what healthy runs showed.

        Start-up events that a rule called a save or an evaluation take the stage of their
        place in the healthy start-up ("validation split: 0.1" is data); loop events
        lose start-up labels (a data-loader line printed every iteration is training); end
        events are finalization; an unnamed line that ends a save or an evaluation in
        healthy runs (``closers``) is training again.  Events healthy runs never printed keep
        the rule's label.
        """
        out = list(stages)
        closing = self.closing_ids()
        for c, cid in enumerate(job.event_ids):
            if cid in closing and stages[c] is None and self.phase.get(cid) == LOOP_PHASE:
                out[c] = "training"  # the line that ends a save or evaluation: back to training
                continue
            ph = self.phase.get(cid)
            if ph is None:
                continue
            rule = stages[c]
            if ph == STARTUP:
                # a save or evaluation word cannot name a stage before training ("Running
                # training" starts the loop).  Lines that name nothing stay unnamed: the
                # healthy order mixes what different ranks print
                if rule in ("evaluation", "checkpointing"):
                    out[c] = self.stage.get(cid, rule)
            elif ph == LOOP_PHASE:
                if rule in EARLY:
                    out[c] = None
            elif rule not in ("evaluation", "finalization") and _after_loop(job, c, counter):
                # healthy runs printed it only after their last step (a short run's only
                # save is its final one); so did this job, or it is a periodic phase here
                out[c] = "finalization"
        return out

    def bracket(self, job: ParsedJob, r: int,
                pos: int) -> tuple[str | None, str | None, list[str]]:
        """Where node ``r`` stopped in the healthy start-up: (stage of the last healthy
        start-up event it printed before record ``pos``, stage of the first one a node of
        its role prints that it never reached, the stages of all it reached).  ``None``
        parts when unknown."""
        reached: set[int] = set()
        order: list[tuple[int, int]] = []  # (first record, event id) in the node's order
        for c, cid in enumerate(job.event_ids):
            fp = int(job.first_pos[r, c])
            if 0 <= fp < pos and self.phase.get(cid) == STARTUP:
                reached.add(cid)
                order.append((fp, int(cid)))
        seen = set(int(job.event_ids[c]) for c in np.nonzero(job.counts[r] > 0)[0].tolist())
        last = self._frontier([cid for _, cid in sorted(order)])
        at = self.place[last] if last is not None else -1.0
        # what a node of this one's role would have printed next: a node that printed
        # only what every node prints is no first rank that logs the whole start-up
        role = min((self.share[cid] for cid in reached), default=1.0)
        ahead = [cid for cid, ph in self.phase.items()
                 if ph == STARTUP and self.place[cid] > at and cid not in seen
                 and self.share[cid] >= min(0.5, role)]
        nxt = min(ahead, key=lambda cid: self.place[cid]) if ahead else None
        return (
            self.stage.get(last) if last is not None else None,
            self.stage.get(nxt) if nxt is not None else None,
            sorted({self.named[cid] for cid in reached if cid in self.named}),
        )

    def _frontier(self, reached: list[int]) -> int | None:
        """The furthest healthy start-up event a node reached (``reached``: those it
        printed).  A line healthy runs print at more than one place (a timing table's
        "(min, max) time across ranks (ms):" after loading a checkpoint and again after
        building the data) has the place of where they printed it first, which may lie far
        past where this node printed it.  Such a line stands alone at the top: it leaps
        over much more of the healthy start-up than the steps between the node's other
        lines (``LEAP``), so it does not move the frontier there."""
        if not reached:
            return None
        ranked = sorted(reached, key=lambda cid: self.place[cid])
        places = np.array([self.place[cid] for cid in ranked])
        steps = np.diff(places)
        steps = steps[steps > 0]
        usual = float(np.median(steps)) if steps.size >= LEAP_MIN_STEPS else math.inf
        top = len(ranked) - 1
        while top > 0 and places[top] - places[top - 1] > max(LEAP_MIN, LEAP * usual):
            top -= 1
        return ranked[top]


#: an event leaps when it lies further past the node's next furthest one than this many
#: times the usual step between its lines along the healthy start-up, and by more than
#: LEAP_MIN of it; a node needs LEAP_MIN_STEPS steps for its usual one to be known
LEAP, LEAP_MIN, LEAP_MIN_STEPS = 8.0, 0.1, 5


def _after_loop(job: ParsedJob, c: int, counter: Counter | None) -> bool:
    """Did every counting node that printed column ``c`` print it after its last step?"""
    if counter is None:
        return True
    for r, (tpos, _, _) in counter.tracks.items():
        fp = int(job.first_pos[r, c])
        if fp >= 0 and len(tpos) and fp < int(tpos[-1]):
            return False
    return True


def informative(template: str) -> bool:
    """Does a template say anything of its own?  A blank line, a rule of dashes or a bare
    number is printed anywhere: its place in healthy runs says nothing about a phase."""
    return has_words(template)



def learn_timeline(jobs: list[ParsedJob]) -> Timeline | None:
    """The phase timeline of healthy jobs (see module docstring); ``None`` without any."""
    votes: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    places: dict[int, list[float]] = defaultdict(list)
    rule: dict[int, str | None] = {}
    text: dict[int, str] = {}
    used = 0
    counted: set[int] = set()
    pending: list[tuple[ParsedJob, int]] = []  # nodes that print no counter of their own
    ends: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    announcers: dict[int, int] = defaultdict(int)
    periodic: list[Schedule] = []
    between: list = []
    firsts: dict[int, list[float]] = defaultdict(list)
    words: dict[int, set[str]] = defaultdict(set)
    paced: dict[int, list[tuple[float, float, int]]] = defaultdict(list)
    planned: list[dict[int, int]] = []
    for job in jobs:
        for cid, ws in job_words(job).items():
            words[cid] |= ws
        profile = choose_profile(job.templates, job.framework)
        stages = [profile.stage_of(t) for t in job.templates]
        counter = find_counter(job, profile, stages)
        pace = _pace(job, counter, stages)
        if pace is not None:
            paced[pace[0]].append(pace[1:])
            for c, cid in enumerate(job.event_ids):
                if cid in (pace[0], pace[3]):
                    text.setdefault(int(cid), job.templates[c])
        if counter is None or not counter.tracks:
            continue
        used += 1
        counted.update(int(job.event_ids[c]) for c in counter.cols)
        first = _first_count(counter)
        if first is not None:
            firsts[int(job.event_ids[counter.marker])].append(first)
        for c, cid in enumerate(job.event_ids):
            rule.setdefault(cid, stages[c])
            text.setdefault(cid, job.templates[c])
        training = np.array([st == "training" for st in stages], dtype=bool)
        _learn_closers(job, stages, set(counter.cols), ends, announcers)
        periodic.extend(s for s in schedules(job, profile) if s not in periodic)
        between.append(gaps_.learn_job(job, counter, profile))
        planned.append(learn_totals(job, counter))
        for r in range(job.n_nodes):
            bounds = _loop_bounds(job, r, counter.tracks.get(r), training)
            if bounds is None:
                pending.append((job, r))
            else:
                _vote(job, r, bounds, votes, places)
    # ranks that print no iterations (Megatron's first rank prints the start-up, its last
    # the iterations) still log in step with the others: their loop begins with the first
    # event that the counting nodes print inside the loop
    looped = {cid for cid, v in votes.items() if v[LOOP_PHASE] > v[STARTUP] + v[END]}
    for job, r in pending:
        ids = np.asarray(job.event_ids)
        inside = np.isin(ids, list(looped)) & (job.first_pos[r] >= 0)
        if inside.any():
            start = int(job.first_pos[r, inside].min())
            _vote(job, r, (start, int(job.n_records[r])), votes, places)
    paces = {cid: _agreed(v) for cid, v in paced.items() if _agreed(v)}
    pace_text = {cid: text[cid] for p in paces for cid in (p, paces[p][2]) if cid in text}
    if not used:
        # runs too short to trust their counter alone still pace their reports
        return Timeline(paces=paces, templates=pace_text) if paces else None
    tl = Timeline(jobs=used, counters=counted, schedules=periodic, gaps=gaps_.combine(between),
                  first_counts={cid: float(np.median(v)) for cid, v in firsts.items()},
                  paces=paces, totals=agreed_totals(planned),
                  words={cid: frozenset(ws) for cid, ws in words.items()})
    nodes = sum(job.n_nodes for job in jobs)
    tl.templates.update(pace_text)
    for cid, v in votes.items():
        tl.share[cid] = sum(v.values()) / max(nodes, 1)
        tl.phase[cid] = max(v, key=lambda k: (v[k], k))
        tl.templates[cid] = text[cid]
        if tl.phase[cid] == STARTUP:
            tl.place[cid] = float(np.median(places[cid]))
    # stage names along the healthy start-up: the rule's early stage, else the nearest
    # named event before it; what comes before anything named is initialization
    current = "initialization"
    for cid in sorted((c for c, p in tl.phase.items() if p == STARTUP), key=tl.place.get):
        if rule.get(cid) in EARLY:
            current = tl.named[cid] = rule[cid]  # type: ignore[assignment]
        tl.stage[cid] = current
    for cid, ph in tl.phase.items():
        if ph == LOOP_PHASE:
            tl.stage[cid] = rule[cid] if rule.get(cid) in _LOOP_STAGES else "training"
        elif ph == END:
            tl.stage[cid] = "evaluation" if rule.get(cid) == "evaluation" else "finalization"
    for a, got in ends.items():
        if tl.phase.get(a) != END:  # a final save is no phase the loop comes back from
            closing = {b for b, k in got.items() if 2 * k > announcers[a]
                       and tl.phase.get(b) != END}
            if closing:
                tl.closers[a] = closing
                for cid in (a, *closing):
                    tl.templates.setdefault(cid, text[cid])
    return tl


#: how far after an announcement the line that ends its phase is looked for (records)
_WINDOW = 400


def _learn_closers(job: ParsedJob, stages: list[str | None], counter_cols: set[int],
                   ends: dict[int, dict[int, int]], announcers: dict[int, int]) -> None:
    """Count, per node that announces saves or evaluations, which line ends each one.

    The line that ends a phase is worded as a framework likes ("[ckpt] iteration 100
    saved", "***** eval metrics *****"), but in a healthy run it follows every
    announcement on the same node, as often as the announcement is printed.  Of the lines
    that do, the one printed last is the end (shard-by-shard progress lines come before
    it); a line of the announcement's own phase first, as another phase may follow in
    the same gap (a save after an evaluation).  Votes go to
    ``ends[announcement id][closer id]``, one per announcing node.
    """
    ids = np.asarray(job.event_ids)
    phase_cols = [c for c, st in enumerate(stages) if st in ("checkpointing", "evaluation")]
    for r in range(job.n_nodes):
        seq = job.seqs[r]
        counts = job.counts[r]
        counted = np.flatnonzero(np.isin(seq, list(counter_cols)))
        for a in phase_cols:
            at = np.nonzero(seq == a)[0]
            # periodic phases, or a one-off the loop went on after (a one-off save before
            # the end may be the final one); a one-off's end must be a line of its own phase
            once = at.size == 1 and bool(np.isin(seq[int(at[0]) + 1:], list(counter_cols)).any())
            if at.size < 2 and not once:
                continue
            bounds = np.append(at[1:], len(seq))
            seen: dict[int, int] = defaultdict(int)
            offset: dict[int, list[int]] = defaultdict(list)
            for p, q in zip(at.tolist(), bounds.tolist(), strict=True):
                # the phase is over by the next step the job counts: what comes after that
                # belongs to the loop (the next evaluation's report is no end of this save)
                k = int(np.searchsorted(counted, p, side="right"))
                if k < counted.size:
                    q = min(q, int(counted[k]))
                window = seq[p + 1: min(q, p + 1 + _WINDOW)]
                cols, first = np.unique(window, return_index=True)
                for c, f in zip(cols.tolist(), first.tolist(), strict=True):
                    seen[c] += 1
                    offset[c].append(f)
            n = len(at)
            best, where = None, (False, -1.0)
            for c, k in seen.items():
                if (c == a or c in counter_cols or k < max(1, 0.8 * n)
                        or (once and stages[c] != stages[a])
                        or not (0.8 * n <= counts[c] <= 1.25 * n + 1)
                        or stages[c] in EARLY or not informative(job.templates[c])):
                    continue
                # a phase's own report ends it ("eval: iteration 35 val_loss=1.26" after
                # "running evaluation at iteration 35"), though a save may follow in the
                # same gap: the last line of the phase's own kind, else the last line
                key = (stages[c] == stages[a], float(np.median(offset[c])))
                if key > where:
                    best, where = c, key
            announcers[int(ids[a])] += 1
            if best is not None:
                ends[int(ids[a])][int(ids[best])] += 1


def _vote(job: ParsedJob, r: int, bounds: tuple[int, int],
          votes: dict[int, dict[str, int]], places: dict[int, list[float]]) -> None:
    """Count where node ``r`` first printed each event: before, in or after its loop."""
    p0, p1 = bounds
    for c in np.nonzero(job.first_pos[r] >= 0)[0].tolist():
        if not informative(job.templates[c]):
            continue
        fp = int(job.first_pos[r, c])
        cid = int(job.event_ids[c])
        if fp < p0:
            votes[cid][STARTUP] += 1
            places[cid].append(fp / max(p0, 1))
        elif fp <= p1:
            votes[cid][LOOP_PHASE] += 1
        else:
            votes[cid][END] += 1


def _loop_bounds(job: ParsedJob, r: int, track, training: np.ndarray) -> tuple[int, int] | None:
    """(first, last) record position of the training loop on node ``r``, from its own
    counter lines; the loop begins earlier if the node announced training before its first
    counted step ("***** Running training *****")."""
    if track is None or not len(track[0]):
        return None
    start, end = int(track[0][0]), int(track[0][-1])
    announced = job.first_pos[r, training]
    announced = announced[(announced >= 0) & (announced < start)]
    if announced.size:
        start = int(announced.min())
    return start, end


def _first_count(counter) -> float | None:
    """The first count a job's counter printed on any node (the lowest first count: a
    node that joined late starts higher)."""
    firsts = []
    for _, num, _ in counter.tracks.values():
        ok = num[~np.isnan(num)]
        if ok.size:
            firsts.append(float(ok[0]))
    return min(firsts) if firsts else None


def _pace(job: ParsedJob, counter: Counter | None, stages: list[str | None]
          ) -> tuple[int, float, float, int] | None:
    """(event id, step of its first line, steps per line, event id of the numbered line
    that paced it) of the unnumbered line a healthy job printed every few steps, counted
    from its numbered lines (``densify``).

    A short healthy run may number only three or four saves ("checkpoint-280", "-560",
    ...), too few for a counter to be trusted on their own (``find_counter``); a line
    printed the same number of times in each of their intervals confirms that they count
    steps, so each such numbered line is tried as the anchors."""
    quiet = np.zeros((job.n_nodes, job.n_events), bool)
    for ctr in [counter] if counter is not None else _numbered_lines(job):
        finer = densify(job, ctr, list(stages), quiet)
        if finer is None:
            continue
        firsts = [float(num[0]) for _, num, _ in finer.tracks.values() if len(num)]
        if firsts:
            return (int(job.event_ids[finer.marker]), min(firsts), float(finer.step),
                    int(job.event_ids[ctr.marker]))
    return None


#: counts a numbered line needs to anchor a paced line in a healthy run without a counter
MIN_ANCHORS = 3


def _numbered_lines(job: ParsedJob):
    """Each node's lines whose number rises at every occurrence, three times or more, as a
    one-line counter (a collective library's own lines count channels and peers)."""
    for i, mk in enumerate(job.markers):
        for c, track in mk.items():
            if LIBRARY_LOG.search(job.templates[c]):
                continue
            ok = ~np.isnan(track.numbers)
            nums = track.numbers[ok]
            if len(nums) < MIN_ANCHORS or not (np.diff(nums) > 0).all():
                continue
            yield Counter(marker=c, cols=[c], step=float(np.median(np.diff(nums))),
                          tracks={i: (track.positions[ok], nums, track.ts[ok])})


def _agreed(paces: list[tuple[float, float, int]]) -> tuple[float, float, int] | None:
    """One pace from the healthy jobs' own, when they agree (one configuration paces its
    reports alike; disagreeing runs teach nothing)."""
    return paces[0] if all(p == paces[0] for p in paces) else None


def paced_steps(tl: Timeline, job: ParsedJob) -> tuple[float, float] | None:
    """(the last step a job reported, steps per report) by how many of a paced line it
    printed.  Healthy runs of its configuration printed that line every ``k`` steps, first
    at step ``s0``, so a job's ``n``-th such line reported step ``s0 + (n - 1) k``.  A job
    resumed from elsewhere starts its count elsewhere: its last line of the kind that paced
    it (a save to "checkpoint-150", printed once is enough) names a step on that grid, and
    each paced line after it is ``k`` more.  The node that printed the line most counts;
    the finest pace wins.  ``None`` when the job printed no paced line.  For a job that
    numbers too few steps to count them itself (one save before it died, a resumed run
    that died soon after)."""
    ids = {int(cid): c for c, cid in enumerate(job.event_ids)}
    for cid, (s0, k, anchor) in sorted(tl.paces.items(), key=lambda kv: kv[1][1]):
        c = ids.get(cid)
        if c is None or not job.counts[:, c].any():
            continue
        i = int(np.argmax(job.counts[:, c]))
        seq = job.seqs[i]
        counted = s0 + (int(job.counts[i, c]) - 1) * k
        a = ids.get(anchor)
        if a is None or not job.counts[i, a] or job.last_pos is None:
            return counted, k
        at = int(job.last_pos[i, a])
        before = int((seq[:at] == c).sum())
        guess = s0 + (before - 1) * k  # the anchor's step, were the job counted from s0
        named = [float(v) for v in digit_runs(job.last_examples[i].get(a, ""))
                 if v >= s0 and (v - s0) % k == 0]
        if not named:
            return counted, k
        value = min(named, key=lambda v: abs(v - guess))
        return value + k * int((seq[at + 1:] == c).sum()), k
    return None


def first_step(tl: Timeline, job: ParsedJob) -> list[float]:
    """The steps a job was in when it died in training before printing any count: the
    first count of each counter healthy runs of its configuration printed, lowest first.

    Empty when the job printed what the healthy runs printed inside their loop (three
    times or more on a node, not all at one moment): it was past its first steps, and its
    count is in a wording the healthy runs did not use, not missing.  Several ranks that
    share a node's log each print the loop's opening line ("Training starts at step
    4751") at the same moment: that is one moment of the job, not three steps."""
    if not tl.first_counts:
        return []
    ids = np.asarray(job.event_ids)
    looped = np.array([tl.phase.get(int(cid)) == LOOP_PHASE for cid in ids], dtype=bool)
    if looped.any():
        counts = job.counts[:, looped]
        first, last = job.first_ts[:, looped], job.last_ts[:, looped]
        one_moment = np.isfinite(first) & np.isfinite(last) & (last - first < 1.0)
        if ((counts >= 3) & ~one_moment).any():
            return []
    return sorted(set(tl.first_counts.values()))


#: "Training starts at step 4751", "resuming from iteration 8000": a step a line names
_NAMES_STEP = re.compile(r"\b(?:iter(?:ation)?|step)\b\s*[:=#]?\s*(\d+)\b", re.I)
#: how many of a node's records before its failure may name the step it was starting
START_REACH = 40


def announced_start(job: ParsedJob, r: int, pos: int) -> int | None:
    """The step node ``r`` said it was starting at, in its last records before record
    ``pos`` (a failure before its first step report): "Training starts at step 4751".

    A resumed run counts on from its checkpoint, so the first count healthy runs printed
    (they began at step 1) does not date its first step; the line that announces where it
    starts does.  The latest such line before the failure wins."""
    best: tuple[int, int] | None = None
    for c in range(job.n_events):
        at = int(job.first_pos[r, c])
        if at < 0 or at >= pos or at < pos - START_REACH:
            continue
        ex = job.examples[r].get(c)
        m = _NAMES_STEP.search(ex[1]) if ex else None
        if m and (best is None or at > best[0]):
            best = (at, int(m.group(1)))
    return best[1] if best else None


def timeline_rows(tl: Timeline) -> list[dict]:
    """A timeline as rows keyed by template text, for the stored normal pool (cluster ids
    belong to one template store; texts are matched again when the pool is used)."""
    rows = []
    for cid in [*tl.phase, *(c for c in tl.paces if c not in tl.phase)]:
        pace = tl.paces.get(cid)
        rows.append({
            "template": tl.templates[cid],
            "phase": tl.phase.get(cid, LOOP_PHASE),
            "place": tl.place.get(cid),
            "stage": tl.stage.get(cid),
            "named": tl.named.get(cid),
            "share": tl.share.get(cid, 0.0),
            "counter": cid in tl.counters,
            "first_count": tl.first_counts.get(cid),
            "pace_first": pace[0] if pace else None,
            "pace_step": pace[1] if pace else None,
            "pace_anchor": tl.templates.get(pace[2]) if pace else None,
        })
    return rows


def pool_rows(job: ParsedJob) -> list[dict]:
    """A healthy job's rows for the stored normal pool: its event statistics
    (``l4.crossjob.normal_rows``) and where each event sits in its timeline, so that a
    stored pool teaches stage and iteration as baselines do."""
    rows = normal_rows(job)
    tl = learn_timeline([job])
    if tl is None:
        return rows
    by_text = {row["template"]: row for row in timeline_rows(tl)}
    out = []
    for row in rows:
        extra = by_text.get(row["template"])
        out.append({**row, **{k: v for k, v in extra.items() if k != "template"}}
                   if extra else row)
    return out


def timeline_from_rows(rows: list[dict], match, jobs: int = 1) -> Timeline | None:
    """The timeline stored rows describe, through ``match(template) -> cluster id | None``;
    rows of several healthy jobs are pooled (median place, most common phase)."""
    by_cid: dict[int, list[dict]] = defaultdict(list)
    text: dict[int, str] = {}
    for row in rows:
        cid = match(row["template"])
        if cid is None:
            continue
        by_cid[cid].append(row)
        text.setdefault(cid, row["template"])
    if not by_cid:
        return None
    tl = Timeline(jobs=jobs)
    for cid, group in by_cid.items():
        phases = [g["phase"] for g in group]
        ph = max(set(phases), key=lambda p: (phases.count(p), p))
        tl.phase[cid] = ph
        tl.templates[cid] = text[cid]
        tl.share[cid] = max(float(g.get("share") or 0.0) for g in group)
        same = [g for g in group if g["phase"] == ph]
        if ph == STARTUP:
            tl.place[cid] = float(np.median([float(g["place"]) for g in same
                                             if g.get("place") is not None] or [0.0]))
        stages = [g["stage"] for g in same if g.get("stage")]
        if stages:
            tl.stage[cid] = max(set(stages), key=lambda s: (stages.count(s), s))
        named = [g["named"] for g in same if g.get("named")]
        if named:
            tl.named[cid] = named[0]
        if any(g.get("counter") for g in group):
            tl.counters.add(cid)
        firsts = [float(g["first_count"]) for g in group if g.get("first_count") is not None]
        if firsts:
            tl.first_counts[cid] = float(np.median(firsts))
        paces = [(float(g["pace_first"]), float(g["pace_step"]), match(g["pace_anchor"]))
                 for g in group if g.get("pace_step") and g.get("pace_anchor")]
        if paces and _agreed(paces) and paces[0][2] is not None:
            tl.paces[cid] = paces[0]
    return tl


def merge_timelines(*parts: Timeline | None) -> Timeline | None:
    """One timeline from several (baselines given on the command line, the stored pool):
    where they disagree on an event, the one learned from more jobs wins."""
    parts_ = sorted((p for p in parts if p is not None), key=lambda p: p.jobs)
    if not parts_:
        return None
    out = Timeline(jobs=sum(p.jobs for p in parts_))
    for p in parts_:  # fewer jobs first, so more jobs overwrite
        out.phase.update(p.phase)
        out.place.update(p.place)
        out.stage.update(p.stage)
        out.templates.update(p.templates)
        out.share.update(p.share)
        out.named.update(p.named)
        out.counters |= p.counters
        out.first_counts.update(p.first_counts)
        out.paces.update(p.paces)
        out.totals.update(p.totals)
        for cid, ws in p.words.items():
            out.words[cid] = out.words.get(cid, frozenset()) | ws
        for a, ends in p.closers.items():
            out.closers.setdefault(a, set()).update(ends)
        out.schedules.extend(s for s in p.schedules if s not in out.schedules)
    out.gaps = gaps_.merge(*(p.gaps for p in parts_))
    return out
