"""The stage a job failed in.

Each event is classified by the framework profile's rules (data, see ``l4.profiles``); a
node's stage at a point of its log is that of the last classified event before it (once
training has begun, start-up stages cannot come back).  The failure point is where the
culprit's first unusual event is (or where its log ends, for a silent crash); an error's own
wording can refine the stage (``error_hints``).  What other ranks announced fills in what
the culprit did not print: a save or evaluation for the iteration last completed (matched by
its number: node clocks disagree by seconds), an evaluation the schedule says was due, the
end of training.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection

import numpy as np

from l4.crossjob import CrossJobResult
from l4.declared import declared_end
from l4.gaps import gap_stage
from l4.iterations import Counter, advanced
from l4.mask import digit_runs, named_numbers, numbers_in, strip_prefix
from l4.merge import ParsedJob
from l4.onset import next_time, onset, time_near
from l4.phases import Timeline
from l4.profiles import EARLY, Profile
from l4.schedule import scheduled_phase
from l4.severity import is_boilerplate

ORDER = ("initialization", "data_loading", "model_loading", "training", "checkpointing",
          "evaluation", "finalization")


LOOP = ("training", "checkpointing", "evaluation")


def event_stages(job: ParsedJob, profile: Profile) -> list[str | None]:
    return [profile.stage_of(t) for t in job.templates]


def stage_at(seq: np.ndarray, pos: int, stages: list[str | None]) -> str | None:
    """Stage of a node just before record ``pos`` (see module docstring).

    Stages only move forward at the ends: once training has begun, start-up stages cannot
    come back, and once the job has announced the end of training, the final save and
    teardown that follow are still finalization.
    """
    return _walk(seq, pos, stages)[0]


def _walk(seq: np.ndarray, pos: int, stages: list[str | None],
          said: dict[int, str] | None = None,
          counting: tuple[set[int], set[int], int] | None = None
          ) -> tuple[str | None, int | None, bool]:
    """(``stage_at``, the event column that decided it, whether the last save or
    evaluation it went through was seen to end by new counts).

    ``said``: record position -> stage, for records of a merged event whose own text names
    a stage its template no longer does (``occurrence_stages``).  ``counting``: (counter
    columns, positions where this node printed each count first, how many new counts end
    a phase).  A counter line with no new count (a progress bar redrawn as its process
    exits) is no step after a save or evaluation.  A counter without a clock needs two new
    counts, as ``phase_ended`` asks by the clock: one can be the step done before the
    announcement (a bar's last update reaches the log after the banner that followed it,
    as torchrun's ``--tee`` copies stderr and stdout separately).
    """
    current: str | None = None
    col: int | None = None
    trained = False
    fresh = 0
    resumed = False
    for p, c in enumerate(seq[: max(pos, 0)].tolist()):
        st = said.get(p, stages[c]) if said else stages[c]
        if st is None:
            continue
        if (st == "training" and counting is not None and current in ("checkpointing", "evaluation")
                and c in counting[0]):
            if p not in counting[1]:
                continue
            fresh += 1
            if fresh < counting[2]:
                continue
            resumed = True
        elif st == "training" and current in ("checkpointing", "evaluation"):
            # not a count: a line that hands back to training ("Successfully saved
            # checkpoint from iteration 10399", which the profile's resume words read as
            # training) shows the phase over as surely as new counts do
            resumed = True
        elif st != "training":
            resumed = False
        fresh = 0
        if st == "training":
            trained = True
        if trained and st in EARLY:
            continue
        if current == "finalization":
            break
        current, col = st, c
    return current, col, resumed


def occurrence_stages(job: ParsedJob, profile: Profile,
                      stages: list[str | None]) -> list[dict[int, str]]:
    """Per node: record position -> stage, for the first and last record of each event
    whose template names no stage but whose text there does.

    The parser merges lines that differ in one word: "***** Running training *****" and
    "***** Running Evaluation *****" become "***** Running <*> *****", "Saving checkpoint"
    and "Loading checkpoint" one "<*> checkpoint".  The template then names no stage, but
    the node's first and last such line are kept verbatim and still do.
    """
    out: list[dict[int, str]] = [{} for _ in range(job.n_nodes)]
    cols = [c for c, t in enumerate(job.templates) if stages[c] is None and "<*>" in t]
    if not cols:
        return out
    for i in range(job.n_nodes):
        seq = job.seqs[i]
        for c in cols:
            if job.counts[i, c] == 0:
                continue
            first = job.examples[i].get(c)
            last = job.last_examples[i].get(c)
            st_first = profile.stage_of(first[1]) if first else None
            st_last = profile.stage_of(last) if last else None
            if st_first is None and st_last is None:
                continue
            at = np.nonzero(seq == c)[0]
            if not at.size:
                continue
            if st_first is not None:
                out[i][int(at[0])] = st_first
            if st_last is not None:
                out[i][int(at[-1])] = st_last
    return out


def _node_stage(job: ParsedJob, stages: list[str | None], i: int, pos: int,
                counter: Counter | None, current: float | None,
                timeline: Timeline | None,
                said: list[dict[int, str]] | None = None) -> tuple[str | None, bool]:
    """(``stage_at`` for node ``i``, was a phase seen to end).  A save or evaluation the
    node announced is over when it then printed the line that ends it in healthy runs
    (``Timeline.closed``), or when the job went on training after it (``phase_ended``)."""
    counting = None
    if counter is not None and i in counter.firsts:
        untimed = i in counter.tracks and bool(np.isnan(counter.tracks[i][2]).all())
        counting = (set(counter.cols), set(counter.firsts[i].astype(int).tolist()),
                    2 if untimed and _drawn(job, counter) else 1)
    st, col, resumed = _walk(job.seqs[i], pos, stages, said[i] if said else None, counting)
    if resumed and st == "training":
        return st, True
    if st in ("checkpointing", "evaluation") and col is not None and (
            (st == "evaluation" and reports_result(job.templates[col]))
            or (timeline is not None and (timeline.closed(job, i, col, pos)
                                          or timeline.ends_a_phase(job, col)))
            or phase_ended(job, counter, i, col, current)):
        return "training", True
    return st, False


#: clocks of different nodes disagree by seconds; iteration lines printed this long after
#: an announcement on another node are certainly later than it
_SKEW = 15.0


def phase_ended(job: ParsedJob, counter: Counter | None, i: int, col: int,
                current: float | None) -> bool:
    """Had the save or evaluation that node ``i`` last announced (event ``col``) ended
    before the failure, because the job's iteration counter went on advancing after it?

    One rank announces saves and evaluations, often another prints the iterations, and the
    line that ends a phase has whatever wording a framework gives it.  Collectives keep
    ranks in step, so a phase that is still running holds every rank's counter still: two
    more iterations completed after the announcement mean it was over.  By the clock,
    with room for skew between nodes; when the announcement carries no time, by the
    iteration it names: the largest of its numbers that the counter printed (its loss,
    perplexity and their digits after the point are no steps the job counted).
    """
    if counter is None or not counter.tracks:
        return False
    step = counter.step or 1.0
    ts_a = float(job.last_ts[i, col])
    if math.isnan(ts_a):
        text = job.last_examples[i].get(col)
        nums = digit_runs(text or "")
        if not nums or current is None or math.isnan(current):
            return False
        steps = [n for n in set(nums)
                 if any((num == n).any() for _, num, _ in counter.tracks.values())]
        return bool(steps) and max(steps) <= current - 2 * step
    later: set[float] = set()
    for _, num, ts in counter.tracks.values():
        ok = ~np.isnan(num) & ~np.isnan(ts) & (ts > ts_a + _SKEW)
        later.update(num[ok].tolist())
    return len(later) >= 2


def failure_stage(job: ParsedJob, cross: CrossJobResult, profile: Profile,
                  stages: list[str | None], r: int, point: tuple[int, int | None, float],
                  counter: Counter | None, current: float | None,
                  timeline: Timeline | None = None) -> str:
    """The stage of a failure that began at ``point`` (``l4.onset.onset``) of node ``r``.

    ``counter`` is the job's iteration counter and ``current`` the iteration in progress
    there (``l4.iterations``); ``timeline`` what healthy runs printed, in which order.
    """
    stage, hinted = _stage_from_words(job, cross, profile, stages, r, point, counter, current,
                                      timeline)
    if stage not in LOOP or current is None or counter is None:
        return stage
    done = current - counter.step
    gaps = timeline.gaps if timeline is not None else None
    if gaps is not None and _at_its_end(job, timeline, gaps, done) and (
            hinted not in (None, "training") or stage != "training"):
        # the job had completed every iteration its healthy runs ran, and its error names
        # a phase or it had left training: what failed now is the end of training, a final
        # save worded like every other save included.  A job that merely ran out of time
        # after its last step (a straggler's time limit) failed where it slowed, not here;
        # nor did one whose error names training (a NaN loss, a backward pass): healthy
        # runs of one configuration may have run fewer steps than this one
        return "evaluation" if hinted == "evaluation" else "finalization"
    if hinted is None:
        # which phase had begun after the last completed iteration: by the numbers the
        # announcements carry (clocks of different nodes disagree by seconds); by what
        # healthy runs printed after that iteration and how much of it this job printed
        # (a phase worded only once it is over); by the schedule it validates on
        routine = frozenset(np.flatnonzero(~cross.novel).tolist()) if cross.baseline_used else frozenset()
        after = phase_after(job, profile, stages, done, timeline, counter, routine)
        if after is None and stage == "training" and gaps is not None:
            before = [point[0] if i == r else onset(job, cross, i)[0]
                      for i in range(job.n_nodes)]
            after = gap_stage(job, profile, counter, gaps, done, before, timeline.templates)
        if after is None and stage == "training":
            after = scheduled_phase(job, profile, done,
                                    timeline.schedules if timeline is not None else ())
        stage = after or stage
    return stage


def _at_its_end(job: ParsedJob, timeline: Timeline, gaps, done: float) -> bool:
    """Had the job completed every step it was to run?  By the length it declared at
    start-up where healthy runs show which line declares it (``l4.declared``): healthy runs
    are often shorter, and a job that went past their end with steps still to run saves
    and validates as it did before.  Otherwise by where the healthy runs ended."""
    planned = declared_end(job, timeline.totals)
    if planned is not None and done == done:
        return done >= planned
    return gaps.ended(done)


def _stage_from_words(job: ParsedJob, cross: CrossJobResult, profile: Profile,
                      stages: list[str | None], r: int, point: tuple[int, int | None, float],
                      counter: Counter | None, current: float | None,
                      timeline: Timeline | None) -> tuple[str, str | None]:
    """(stage, stage the error's own words name or ``None``), before iteration numbers
    are consulted."""
    pos, line, t0 = point
    said = occurrence_stages(job, profile, stages)
    stage, over = _node_stage(job, stages, r, pos, counter, current, timeline, said)
    trouble = _first_trouble(job, cross, r) if stage == "finalization" else None
    torn_down = False
    if trouble is not None and trouble[0] < pos:
        # what healthy runs print as they end (a store's "failed to send a keep-alive
        # heartbeat" as its server goes away) is the node's teardown when it came after
        # the node's own trouble began: the stage is where that trouble found it
        before, over_before = _node_stage(job, stages, r, trouble[0], counter, current,
                                          timeline, said)
        if before in LOOP:
            stage, over, torn_down = before, over_before, True
    # the error's own words, and the code its traceback went through, may place it more
    # precisely (a failed torch.save is checkpointing, an OOM inside evaluate() evaluation)
    anom = np.nonzero(cross.anomalous[r] & (cross.severity >= 0.5))[0]
    ordered = sorted(anom.tolist(), key=lambda c: job.first_pos[r, c])
    # what the culprit says that most nodes do not comes first: its launcher's error
    # summary quotes the dead rank's traceback ("ds = ShardDataset(shard)") after a dozen
    # teardown lines every launcher prints
    shared = cross.anomalous.sum(axis=0)
    own = [c for c in ordered if 2 * int(shared[c]) <= job.n_nodes][:6]
    first_errs = own + [c for c in ordered[:6] if c not in own]
    if _stopped_from_outside(job, cross, r, pos):
        # every node's trouble began with one line that no program raised (a scheduler's
        # cancel, an operator's stop): the job was stopped wherever it was, and what it
        # printed after that (a signal handler's "saving checkpoint and exiting") is its
        # reaction, not the phase it failed in
        first_errs = [c for c in first_errs if job.first_pos[r, c] <= pos]
    progressed = _progressed(job, cross, counter, timeline)
    # training had begun: a start-up stage an outer frame names ("trainer.fit(model,
    # datamodule=dm)") cannot come back, so it must not hide an inner one that can
    ruled_out = frozenset(EARLY) if progressed else frozenset()
    hinted = _error_hint(job, profile, r, first_errs, ruled_out)
    if hinted is None and first_errs:
        hinted = _dump_hint(job, profile, r, np.nonzero(cross.anomalous[r])[0],
                            int(job.first_pos[r, first_errs[0]]), ruled_out)
    if hinted == "evaluation" and not progressed:
        hinted = None  # no step yet: validation data named at start-up is data loading
    if hinted:
        stage = hinted
    if timeline is not None and hinted is None and not progressed:
        # no iteration had completed anywhere: where in the healthy start-up did it stop?
        learned, decisive = _startup_bracket(timeline, job, r, pos)
        if decisive:
            return learned, None
        stage = learned or stage
    # an error line without a clock of its own (traceback text, srun) happened about when
    # the lines around it did.  That rough time only fills in what the culprit's own log
    # cannot tell (a save or evaluation rank 0 announced)
    rough = math.isnan(t0) and line is not None
    t_stage = time_near(job, r, line) if rough else t0
    if torn_down:
        # ... and the job's clock is read there too, before every node's teardown
        t_trouble = time_near(job, r, trouble[1])
        if not math.isnan(t_trouble) and not t_trouble > t_stage:
            t_stage = t_trouble
    timed = _stage_by_time(job, stages, t_stage)
    if rough and timed is not None and not (
        stage is None or (stage == "training" and timed not in EARLY)
    ):
        timed = None
    if over and timed in ("checkpointing", "evaluation"):
        timed = None  # the culprit's own log shows that phase end; it knows best
    if hinted is None and timed is not None and (
        stage in (None, "training") or (stage in EARLY and timed in EARLY)
    ):
        # the job-wide latest stage transition before the failure (rank 0 announces saves,
        # the last rank iterations, the culprit maybe nothing at all).  A save, evaluation
        # or end the culprit announced itself stands.  Start-up stages
        # print few timestamps, so between two of them the one the job reaches later wins
        if stage in EARLY and timed in EARLY:
            order = _startup_order(job, stages)
            stage = max((stage, timed), key=lambda st: order.get(st, -1))
        else:
            stage = timed
    if (hinted is None and progressed and stage in EARLY
            and max(_steps_after(counter, t_stage), _untimed_steps(job, cross, counter, r)) >= 2):
        # the job completed steps after the culprit's last line: it took part in their
        # collectives, so that line (start-up, from a rank that prints nothing in the
        # loop) does not date the failure; the job was in its loop
        stage = "training"
    if hinted is None and (stage is None or stage in EARLY):
        # the culprit may print no progress lines of its own (only some ranks log
        # iterations): if the rest of the job was already past start-up, so was the job
        # a rough time (the nearest line of the node that has one) is no later than the
        # failure only: whether the others had begun training by then is told by the
        # next line of the node that has a time, a bound from above
        t_pack = next_time(job, r, line) if rough else t_stage
        pack = _pack_stage(job, cross, stages, r, t_pack, counter, current, timeline, said)
        if (pack == "finalization" and not progressed and timeline is not None
                and timeline.counters):
            # healthy runs of this configuration counted steps before they finished, and
            # this job counted none: what its peers printed is teardown of a job that
            # never reached its loop (a store's "remote server shutdown" after a rank died)
            pack = None
        if pack is not None and (stage is None or ORDER.index(pack) > ORDER.index(stage)):
            stage = pack
    if stage is None:
        stage = "initialization"
    if stage in LOOP and _training_finished(job, cross, stages):
        stage = "finalization"
    if stage == "checkpointing" and _final_save(job, stages):
        stage = "finalization"
    return stage, hinted


def _first_trouble(job: ParsedJob, cross: CrossJobResult, r: int) -> tuple[int, int] | None:
    """(record, line) where node ``r`` first printed an unusual error, or ``None``."""
    mask = cross.anomalous[r] & (cross.severity >= 0.5) & (job.first_pos[r] >= 0)
    if not mask.any():
        return None
    c = int(np.flatnonzero(mask)[np.argmin(job.first_pos[r][mask])])
    return int(job.first_pos[r, c]), int(job.first_line[r, c])


#: a share of the nodes this large whose trouble began with one line: the job was stopped
STOPPED_TOGETHER = 0.9
#: a line a program raised: an exception's name, or the header of its traceback
_RAISED = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b|\bTraceback \(most recent call last\)")


def _stopped_from_outside(job: ParsedJob, cross: CrossJobResult, r: int, pos: int) -> bool:
    """Did every node's trouble (nearly) begin with the line that begins node ``r``'s at
    record ``pos``, a line no program raised (no exception, no traceback under it)?

    A node that fails makes the others fail after it, each in its own words and at its
    own time; one external stop reaches every node at once with the same line."""
    if job.n_nodes < 2:
        return False
    at = np.nonzero(cross.anomalous[r] & (job.first_pos[r] == pos))[0]
    if at.size != 1:
        return False
    c = int(at[0])
    ex = job.examples[r].get(c)
    if _RAISED.search(job.templates[c]) or (ex and any('File "' in f for f in ex[2])):
        return False
    same = sum(1 for i in range(job.n_nodes)
               if job.counts[i, c] > 0 and onset(job, cross, i)[0] == job.first_pos[i, c])
    return same >= STOPPED_TOGETHER * job.n_nodes


#: a traceback frame inside an installed library or the interpreter: how the code got
#: there (torch.load serves data and weights alike), not what the program was doing
_LIBRARY_FRAME = re.compile(r'File "[^"]*(?:site-packages|dist-packages|/lib/python\d|<frozen )')


#: a line that names training data as well as validation data hands both on (a training
#: loop given its evaluation loader, a builder of every split): it dates no evaluation
_TRAIN_DATA = re.compile(r"\btrain(?:ing)?_?(?:data(?:set|loader)?|loader|ds|split|iter(?:ator)?)s?\b",
                         re.I)


def _own_frames(ctx: list[str]) -> list[str]:
    """The traceback lines of the program's own frames: a library frame's "File" line and
    the source lines under it go together ("self._evaluation_step(batch, batch_idx,
    dataloader_idx)" is Lightning's code, not the program's, whatever it names)."""
    out: list[str] = []
    library = False
    for line in ctx:
        if 'File "' in line:
            library = bool(_LIBRARY_FRAME.search(line))
        elif not _FRAME_BODY.match(line):
            library = False  # an exception's message, a chained traceback's header
        if not library:
            out.append(line)
    return out


#: a frame's source line or its ^^^ marks: indented deeper than "  File", behind any
#: launcher prefixes, one or two ("[rank9]:     self.val_loop.run()", Slurm's label
#: before torchrun's: "18: [rank18]:     self._evaluation_step(batch, ...)")
_FRAME_BODY = re.compile(r"^(?:\s*[^\s:]+:)*\s{3,}\S")


def _error_hint(job: ParsedJob, profile: Profile, r: int, cols: list[int],
                ruled_out: frozenset[str] = frozenset()) -> str | None:
    """The stage the first errors of node ``r`` name: by their own words and the program's
    own traceback frames first ("ds = ShardDataset(shard)" is data loading, whatever
    ``torch.load`` inside it says), then the library frames below them."""
    library: str | None = None
    for c in cols:
        ex = job.examples[r].get(c)
        ctx = ex[2] if ex else []
        # innermost frame first: it says what the program was doing when it failed; the
        # outer ones only how it got there ("train_ds, valid_ds, test_ds =
        # build_train_valid_test_datasets(" names validation data while building datasets)
        # the error's words as printed, too: masking hides the path it names
        # ("NotFoundError: /mnt/datasets/c4/c4-train.tfrecord-00166-of-00512")
        raw = [strip_prefix(ex[1])] if ex else []
        own = [job.templates[c], *raw] + list(reversed(_own_frames(ctx)))
        hint = _first_hint(profile, own, ruled_out)
        if hint:
            return hint
        if library is None:
            # a library frame by its file and function: its source lines are its own business
            library = _first_hint(profile, [f for f in reversed(ctx) if 'File "' in f],
                                  ruled_out)
    return library


#: how many records after the first error a stack dump that belongs to it may start
DUMP_REACH = 12


def _dump_hint(job: ParsedJob, profile: Profile, r: int, anom: np.ndarray,
               first: int, ruled_out: frozenset[str] = frozenset()) -> str | None:
    """The stage the program's own frames name in a stack dump printed right after node
    ``r``'s first error, under a header of its own: faulthandler prints "Fatal Python error:
    Segmentation fault", a blank line, then "Current thread 0x... (most recent call
    first):" and the crashing thread's frames.  Only frames count, not the header's words."""
    near = [c for c in anom.tolist()
            if 0 <= int(job.first_pos[r, c]) - first <= DUMP_REACH]
    library: str | None = None
    for c in sorted(near, key=lambda c: job.first_pos[r, c]):
        ex = job.examples[r].get(c)
        ctx = ex[2] if ex else []
        # a dump lists the most recent call first, the innermost frame at the top
        frames = [f for f in ctx if 'File "' in f and not _LIBRARY_FRAME.search(f)]
        hint = _first_hint(profile, frames, ruled_out)
        if hint:
            return hint
        if library is None:
            # as for a traceback: a library frame by its function, when the program's own
            # frames name nothing ("line 1880 in destroy_process_group" under "<module>")
            library = _first_hint(profile, [f for f in ctx if 'File "' in f], ruled_out)
    return library


def _first_hint(profile: Profile, texts: list[str],
                ruled_out: frozenset[str] = frozenset()) -> str | None:
    for text in texts:
        hint = profile.hint_of(text)
        if hint in ruled_out:
            continue
        if hint == "evaluation" and _TRAIN_DATA.search(text):
            continue  # "train(args, model, train_loader, eval_loader)": both, so neither
        if hint:
            return hint
        if "data_loading" in ruled_out and _TRAIN_DATA.search(text) and 'File "' not in text:
            # once training ran, the program fetching from its training data
            # ("batch = next(train_iter)") is the training loop, whatever it printed last
            # (an evaluation's result)
            return "training"
    return None


def _startup_bracket(timeline: Timeline, job: ParsedJob, r: int,
                     pos: int) -> tuple[str | None, bool]:
    """(start-up stage node ``r`` was in at record ``pos``, is that decisive).

    The stage is that of the last healthy start-up line it printed, or, when it printed
    none, of the first one a node of its role prints.  It is decisive when the node's own
    log walks through the start-up (it printed lines of a stage past initialization): then
    it says where it stopped, and what other nodes went on to print is no evidence.  A
    rank that logs nothing of its own but launcher and library warnings leaves that to the
    rest of the job.
    """
    last, nxt, walked = timeline.bracket(job, r, pos)
    stage = last if last is not None else nxt
    return stage, any(st != "initialization" for st in walked)


def _training_finished(job: ParsedJob, cross: CrossJobResult, stages: list[str | None]) -> bool:
    """Had any node announced the end of training (healthy-looking finalization lines after
    its own training lines) before its own trouble began?  Collectives keep ranks in step,
    so then the whole job was past its last iteration: a save or crash now is final."""
    # the header of a C++ stack torch prints ("Exception raised from ... (most recent call
    # first):") ends healthy runs too, as their store shuts down; printed before an error,
    # it frames that error and announces nothing
    fin = np.array([st == "finalization" and not is_boilerplate(t)
                    for st, t in zip(stages, job.templates, strict=True)], dtype=bool)
    train = np.array([st == "training" for st in stages], dtype=bool)
    if not fin.any() or not train.any():
        return False
    for i in range(job.n_nodes):
        first = job.first_pos[i]
        seen_train = first[train & (first >= 0)]
        if not seen_train.size:
            continue
        p_i, _, _ = onset(job, cross, i)
        # an echo of a peer's failure is trouble too: the healthy-looking lines a node
        # prints after it (a rendezvous shutting down, as every healthy run's end does)
        # are its teardown, not the end of its training
        trouble = _first_trouble(job, cross, i)
        if trouble is not None:
            p_i = min(p_i, trouble[0])
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


def phase_after(job: ParsedJob, profile: Profile, stages: list[str | None],
                 last_done: float, timeline: Timeline | None = None,
                 counter: Counter | None = None, routine: Collection[int] = ()) -> str | None:
    """The evaluation or save announced for iteration ``last_done`` that never finished.

    "saving checkpoint at iteration 100" after "iteration 100/..." means the job was saving
    when it died, unless the same node then printed a line that ends the phase ("successfully
    saved ...").  Compared by line order on one node, so clock skew cannot reorder them.
    Evaluation comes first: frameworks evaluate, then save, after the same iteration; a
    save that the same node announced after that evaluation (in whatever words, naming
    the iteration or not) means the evaluation was over and the save under way.

    An announcement that does not name the iteration ("Validating ...", "Validation:
    iteration 40/100") is dated by line order: a node that printed it after its own line
    of iteration ``last_done`` (``counter``), its last, was in that phase, if healthy runs
    of the configuration print it too (a normal line, not an error whose words happen to
    name a phase).  ``routine``: the job's columns that healthy runs printed at all.
    """
    if last_done is None or math.isnan(last_done) or last_done <= 0:
        return None
    target = float(int(last_done))
    resume = [c for c, t in enumerate(job.templates) if profile.is_resume(t)]
    for phase in ("evaluation", "checkpointing"):
        # the line that ends a phase in healthy runs reports it, it announces nothing; a
        # line merged with another of the same wording ("***** Running <*> *****" is
        # "Running training" at start-up and "Running Evaluation" later) announces the
        # phase its node's last copy names
        merged = {c for c, t in enumerate(job.templates) if "<*>" in t and stages[c] != phase
                  and profile.stage_of(t) is None}
        cols = [c for c, st in enumerate(stages) if (st == phase or c in merged)
                and not (timeline is not None and timeline.ends_a_phase(job, c))
                and not (phase == "evaluation" and reports_result(job.templates[c]))]
        for i in range(job.n_nodes):
            for c in cols:
                text = job.last_examples[i].get(c)
                if not text or job.counts[i, c] == 0:
                    continue
                if c in merged and profile.stage_of(text) != phase:
                    continue
                started = job.last_line[i, c]
                if target not in named_numbers(text) and not _after_own_count(
                        job, counter, timeline, i, c, target, started,
                        routine=c in routine):
                    continue
                # ended by a line the profile knows, or by the one that ends it in
                # healthy runs of this configuration ("[Torch] Saved ...")
                ended = any(job.last_line[i, rc] > started for rc in resume) or (
                    timeline is not None
                    and timeline.closed(job, i, c, len(job.seqs[i])))
                if not ended:
                    if phase == "evaluation" and _saving_after(job, stages, resume, i, started):
                        return "checkpointing"
                    return phase
    return None


#: a measured value: a metric's name, then its number ("val loss 1.5060", "eval_loss':
#: 0.52", "lm loss value: 2.3", "accuracy = 71.2")
_RESULT = re.compile(r"(?:\b|_)(?:loss|acc(?:uracy)?|ppl|perplexity|bleu|rouge\w*|f1|wer|score)"
                     r"(?:\s+value)?['\"]?\s*[:=]?\s*(?:<\*>|[-+]?\d)", re.I)
_BAR = re.compile(r"%\||\bit/s\b|\bs/it\b")


def _drawn(job: ParsedJob, counter: Counter) -> bool:
    """Is the counter a progress bar?  A bar is redrawn on stderr while banners go to
    stdout, so its last update can reach a ``--tee`` log after the banner that followed it;
    a count printed as a line of its own ("iter 250: loss 1.91") arrives in order."""
    return any(_BAR.search(job.templates[c]) for c in counter.cols)


def reports_result(template: str) -> bool:
    """Does an evaluation line state what the evaluation measured?

    Such a line is printed once the evaluation is over ("step 244: train loss 1.43, val
    loss 1.48", Hugging Face's "{'eval_loss': 0.52, ...}", Megatron's "validation loss at
    iteration 100 | lm loss value: 2.3"): a node whose log ends with it was no longer
    evaluating.  A progress bar that shows a running loss is still inside the evaluation."""
    return bool(_RESULT.search(template)) and not _BAR.search(template)


def _after_own_count(job: ParsedJob, counter: Counter | None, timeline: Timeline | None,
                     i: int, c: int, target: float, line: int, *, routine: bool = False) -> bool:
    """Did node ``i`` print line ``line`` (of column ``c``, a line healthy runs print)
    after its own counter line of iteration ``target``, its last one?

    Healthy runs print it if their timeline places it in a phase, or if they printed it
    at all (``routine``, from the cross-job comparison): a banner merged with another
    phase's ("***** Running <*> *****" is Hugging Face's "Running training" at start-up
    and "Running Evaluation" later) has no one phase, and healthy runs counted by a line
    that names no step leave no timeline at all.  A counter read from such a line
    (``l4.unnumbered``) has record positions, not line numbers: the order is read there."""
    if counter is None or i not in counter.tracks:
        return False
    if not routine and (timeline is None or int(job.event_ids[c]) not in timeline.phase):
        return False
    pos, nums, _ = counter.tracks[i]
    if not len(nums) or nums[-1] != target:
        return False
    if i in counter.printed:
        lines, _ = counter.printed[i]
        return bool(len(lines) and line > lines[-1])
    if job.last_pos is None or not len(pos):
        return False
    return bool(job.last_pos[i, c] > pos[-1])


def _saving_after(job: ParsedJob, stages: list[str | None], resume: list[int], i: int,
                  line: int) -> bool:
    """Did node ``i`` announce a save after its line ``line``, one that nothing on that
    node shows to have ended?"""
    for c, st in enumerate(stages):
        if st != "checkpointing" or job.counts[i, c] == 0:
            continue
        at = job.last_line[i, c]
        if at > line and not any(job.last_line[i, rc] > at for rc in resume):
            return True
    return False


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


def _progressed(job: ParsedJob, cross: CrossJobResult, counter: Counter | None,
                timeline: Timeline | None = None) -> bool:
    """Had the job completed a training iteration?  Until then a failure can still belong
    to a start-up stage.

    A node that printed its counter before its own trouble began says so; so does the
    counter healthy runs of the configuration advanced, when it went on advancing after a
    node's first unusual line (a fresh run's warnings at step 1, which resumed healthy
    runs never print): every rank takes part in each step's collectives, so two counts
    mean the whole job was in its loop, whatever that node's first unusual line was.
    Only that counter: numbers a teardown prints (the pids of "Sending process 4002
    closing signal SIGTERM") also rise."""
    if counter is None:
        return False
    marker = counter.marker
    known = timeline is not None and int(job.event_ids[marker]) in timeline.counters
    for i in range(job.n_nodes):
        p_i, _, _ = onset(job, cross, i)
        if 0 <= job.first_pos[i, marker] < p_i:
            return True
        track = counter.tracks.get(i)
        if known and track is not None and advanced(track[1]):
            return True
    return False



def _steps_after(counter: Counter | None, t0: float) -> int:
    """How many distinct steps the job's counter completed after ``t0`` (by the clock,
    with room for skew between nodes); 0 without clocks."""
    if counter is None or math.isnan(t0):
        return 0
    later: set[float] = set()
    for _, num, ts in counter.tracks.values():
        ok = ~np.isnan(num) & ~np.isnan(ts) & (ts > t0 + _SKEW)
        later.update(num[ok].tolist())
    return len(later)


def _untimed_steps(job: ParsedJob, cross: CrossJobResult, counter: Counter | None,
                   r: int) -> int:
    """How many distinct steps the other nodes counted before their own trouble began,
    when node ``r`` counted none and no counter line carries a clock (a progress bar).

    Then no clock orders ``r``'s last line against the steps, but the steps themselves do:
    every rank takes part in each step's collectives, so a node whose last words were
    start-up lines was alive and training for every step the others completed."""
    if counter is None or r in counter.tracks:
        return 0
    if any((~np.isnan(ts)).any() for _, _, ts in counter.tracks.values()):
        return 0
    done: set[float] = set()
    for i, (pos, num, _) in counter.tracks.items():
        p_i, _, _ = onset(job, cross, i)
        ok = ~np.isnan(num) & (pos < p_i)
        done.update(num[ok].tolist())
    return len(done)


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
    started = (first <= t0 + 1.0) & ~_superseded(job, stages, cols)
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


def _superseded(job: ParsedJob, stages: list[str | None], cols: list[int]) -> np.ndarray:
    """(nodes, cols): the node printed a line of another stage without a clock after that
    column's last line.  Training lines often carry no clock ("{'loss': 2.31, ...}", a
    progress bar) while evaluation and save lines do: the last timed stage line is then not
    the stage the job was in, the untimed lines after it are."""
    out = np.zeros((job.n_nodes, len(cols)), dtype=bool)
    st = np.array([stages[c] for c in cols], dtype=object)
    untimed = np.isnan(job.last_ts[:, cols]) & np.isnan(job.first_ts[:, cols]) & (job.counts[:, cols] > 0)
    for i in np.nonzero(untimed.any(axis=1))[0].tolist():
        late = job.last_line[i, cols]
        for j in np.nonzero(untimed[i])[0].tolist():
            out[i] |= (st != st[j]) & (late < late[j])
    return out


def _pack_stage(job: ParsedJob, cross: CrossJobResult, stages: list[str | None], r: int,
                t0: float, counter: Counter | None, current: float | None,
                timeline: Timeline | None,
                said: list[dict[int, str]] | None = None) -> str | None:
    """Most common stage of the other nodes just before their own trouble began, counting
    only nodes whose first training line predates the culprit's failure when clocks tell."""
    votes: dict[str, int] = {}
    train_cols = [c for c, st in enumerate(stages) if st == "training"]
    for i in range(job.n_nodes):
        if i == r:
            continue
        p_i, _, _ = onset(job, cross, i)
        st, _ = _node_stage(job, stages, i, p_i, counter, current, timeline, said)
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
