"""What healthy runs printed between one iteration and the next, and after the last one.

A training loop completes iteration N and then, on some iterations, does something else
before it starts N+1: an evaluation, a save.  After its last iteration it saves the final
model and tears down.  Frameworks word those phases as they like, and many print them only
once they are over ("validation loss at iteration 50" after the evaluation, "[Torch] Saved
..." after the save, a final save worded like every other save).  A job that died inside
one printed nothing that names it; the error's own words ("torch.save" in a traceback)
say a save failed, not which one.

Healthy runs of the same configuration answer by iteration number: after which iterations
a phase came, what it printed and in which order, and at which iteration training ended.
A failed job whose last completed iteration is one of those is placed by how much of that
gap's output it printed (``gap_stage``).  Nothing here depends on wording beyond the
profile's stage words for the lines inside a gap.
"""

from __future__ import annotations

from collections import Counter as Tally
from dataclasses import dataclass, field

import numpy as np

from l4.iterations import Counter
from l4.merge import ParsedJob
from l4.profiles import Profile

#: the phases a loop leaves its iterations for
PHASES = ("evaluation", "checkpointing")


@dataclass
class Gaps:
    """Per iteration number N, the phase lines healthy runs printed after N and before
    N+1 (template-store cluster id, stage), in order; and the last iteration they ran."""

    after: dict[int, tuple[tuple[int, str], ...]] = field(default_factory=dict)
    last: int | None = None
    jobs: int = 0

    def ended(self, done: float) -> bool:
        """Had a job that completed iteration ``done`` run every iteration healthy runs
        ran?"""
        return self.last is not None and done == done and int(done) >= self.last


def _node_gaps(job: ParsedJob, counter: Counter, stages: list[str | None],
               r: int) -> dict[int, list[int]]:
    """Iteration -> the phase columns node ``r`` printed after that iteration's first
    counter line and before the next iteration's, in the order first printed."""
    tpos, tnum, _ = counter.tracks[r]
    first = counter.firsts.get(r, tpos)
    ok = ~np.isnan(tnum)
    nums, starts = tnum[ok], first[ok]
    if not nums.size:
        return {}
    seq = job.seqs[r]
    order = np.argsort(starts, kind="stable")
    nums, starts = nums[order], starts[order].astype(np.int64)
    phase_cols = [c for c, st in enumerate(stages) if st in PHASES]
    if not phase_cols:
        return {}
    # only the phase lines are visited (a node logs millions of records, a few of them
    # phases): each goes to the gap of the last iteration whose first line came before it
    at = np.nonzero(np.isin(seq, phase_cols))[0]
    k = np.searchsorted(starts, at, side="right") - 1
    keep = k >= 0
    groups: dict[int, list[int]] = {}
    for g, p in zip(k[keep].tolist(), at[keep].tolist(), strict=True):
        groups.setdefault(g, []).append(int(seq[p]))
    out: dict[int, list[int]] = {}
    for g in sorted(groups):
        n = float(nums[g])
        # (a report that names its iteration, "validation loss at iteration 35", may carry
        # the counter on: it is still the phase's line).  A line the gap before had too is
        # that phase's, printed late by another rank of the node
        before = set(groups.get(g - 1, ()))
        cols = [c for c in dict.fromkeys(groups[g]) if c not in before]
        if cols and n == int(n):
            out[int(n)] = cols
    return out


def learn_job(job: ParsedJob, counter: Counter, profile: Profile
              ) -> tuple[dict[int, tuple[tuple[int, str], ...]], int | None, int]:
    """One healthy job's gaps (after each iteration, the node that printed most there),
    its last iteration and its counter's step."""
    ids = job.event_ids
    stages = [profile.phase_of(t) for t in job.templates]
    for c, st in enumerate(stages):
        if st is None and "<*>" in job.templates[c]:
            # Drain merged lines of several phases ("***** Running <*> *****"): the words
            # of its latest line tell what it was in the loop ("Running Evaluation")
            texts = [ex for ex in (job.last_examples[r].get(c) for r in range(job.n_nodes)) if ex]
            named = {profile.phase_of(t) for t in texts} - {None}
            if len(named) == 1:
                stages[c] = named.pop()
    best: dict[int, list[int]] = {}
    last: int | None = None
    for r in counter.tracks:
        for n, cols in _node_gaps(job, counter, stages, r).items():
            if len(cols) > len(best.get(n, ())):
                best[n] = cols
        nums = counter.tracks[r][1]
        nums = nums[~np.isnan(nums)]
        if nums.size:
            top = int(nums.max())
            last = top if last is None else max(last, top)
    after = {n: tuple((int(ids[c]), str(stages[c])) for c in cols) for n, cols in best.items()}
    return after, last, max(int(round(counter.step or 1.0)), 1)


def _unambiguous(after: dict[int, tuple[tuple[int, str], ...]], step: int
                 ) -> dict[int, tuple[tuple[int, str], ...]]:
    """Gaps without the lines that some node or run printed after neighbouring
    iterations too.  A progress bar on stderr and log lines on stdout reach the log through
    separate pipes, so a save printed after step 40 may land after the bar's 39 or 41:
    then which gap it belongs to is unknown, and it is left out."""
    where: dict[int, set[int]] = {}
    for n, gap in after.items():
        for cid, _ in gap:
            where.setdefault(cid, set()).add(n)
    blurred = {cid for cid, ns in where.items() if any(n + step in ns for n in ns)}
    out = {}
    for n, gap in after.items():
        kept = tuple(e for e in gap if e[0] not in blurred)
        if kept:
            out[n] = kept
    return out


def combine(parts: list[tuple[dict[int, tuple[tuple[int, str], ...]], int | None, int]]
            ) -> Gaps:
    """The gaps most healthy jobs agree on (``learn_job`` of each), without blurred lines,
    and their last iteration when they all agree (runs of one configuration run the same
    number of iterations; if they do not, where training ends is unknown)."""
    out = Gaps(jobs=len(parts))
    if not parts:
        return out
    seen: dict[int, Tally] = {}
    for after, _, _ in parts:
        for n, gap in after.items():
            seen.setdefault(n, Tally())[gap] += 1
    # what any run printed after any iteration decides what is blurred
    every = {n: tuple(dict.fromkeys(e for gap in tally for e in gap)) for n, tally in seen.items()}
    clear = _unambiguous(every, min(step for _, _, step in parts))
    for n, tally in seen.items():
        gap, k = tally.most_common(1)[0]
        if 2 * k < len(parts):
            continue
        kept = tuple(e for e in gap if e in clear.get(n, ()))
        if kept:
            out.after[n] = kept
    lasts = {last for _, last, _ in parts}
    if len(lasts) == 1:
        out.last = lasts.pop()
    return out


def merge(*parts: Gaps | None) -> Gaps | None:
    """Gaps of several timelines: those learned from more jobs win."""
    have = sorted((p for p in parts if p is not None and p.jobs), key=lambda p: p.jobs)
    if not have:
        return None
    out = Gaps(jobs=sum(p.jobs for p in have))
    lasts = {p.last for p in have if p.last is not None}
    out.last = lasts.pop() if len(lasts) == 1 else None
    for p in have:
        out.after.update(p.after)
    return out


def _printed(job: ParsedJob, counter: Counter, done: int, gap: tuple[tuple[int, str], ...],
             before: list[int]) -> int:
    """How far into ``gap`` (after iteration ``done``) any node of the failed job got: the
    number of its lines up to the furthest one some node printed after its own line of
    iteration ``done`` and before record ``before[node]``."""
    want = {cid: k for k, (cid, _) in enumerate(gap)}
    ids = np.asarray(job.event_ids)
    far = 0
    for i, (tpos, tnum, _) in counter.tracks.items():
        first = counter.firsts.get(i, tpos)
        at = first[tnum == done]
        if not at.size:
            continue
        seq = job.seqs[i][int(at.min()) + 1: max(int(before[i]), 0)]
        for cid in ids[seq].tolist() if seq.size else ():
            k = want.get(int(cid))
            if k is not None:
                far = max(far, k + 1)
    return far


def gap_stage(job: ParsedJob, profile: Profile, counter: Counter, gaps: Gaps, done: float,
              before: list[int], texts: dict[int, str] | None = None) -> str | None:
    """The phase a job was in when it failed right after iteration ``done`` (its last
    completed), by what healthy runs printed after that iteration: the phase of the first
    of those lines no node of this job printed.  ``None`` when healthy runs printed no
    phase there, when some node printed all of it (that phase was over), when this job
    printed that line after an earlier phase (see below), or when it printed none of the
    healthy runs' phase lines at all (other words).
    ``before``: per node, the record where its own trouble began; ``texts``: the healthy
    runs' templates by id (``Timeline.templates``), to tell a phase's report from its
    announcement."""
    if done != done:  # nan
        return None
    n = int(done)
    gap = gaps.after.get(n)
    if not gap:
        return None
    shown = np.nonzero(job.counts.sum(axis=0) > 0)[0].tolist()  # columns any node printed
    printed = {int(job.event_ids[c]) for c in shown}
    if not printed & {cid for g in gaps.after.values() for cid, _ in g}:
        # this job printed none of the healthy runs' phase lines in their words (another
        # log format, another launcher's prefix): their absence here says nothing
        return None
    k = _printed(job, counter, n, gap, before)
    if k >= len(gap):
        return None
    phase = gap[k][1]
    if k == 0 and (gap[k][0] in printed
                   or any(profile.phase_of(job.templates[c]) == phase for c in shown)):
        # the job printed that line (or that phase's, in its own words) after earlier
        # phases: this time it did not, and something else may have stopped it (a slow
        # node's job cancelled at its time limit, dated by its clock rather than by the
        # schedule); only a first phase is placed by the gap alone.  A job that printed
        # the first lines of this very gap was inside it, whatever it printed before
        return None
    if (k > 0 and gap[k - 1][1] != gap[k][1] and texts is not None
            and not _reports(profile, texts.get(gap[k][0]))
            and not _reports(profile, texts.get(gap[k - 1][0]))):
        # the job printed a line of one phase and not the next phase's first, which
        # announces it as it begins ("... saving model to ..." before the save): the next
        # had not begun, and the one it printed last had not reported its end (an
        # evaluation whose bar reached 50/50 still reduces its metrics across ranks).  A
        # phase reported only when over ("validate step: 30200") may have been running
        return gap[k - 1][1]
    return gap[k][1]


def _reports(profile: Profile, text: str | None) -> bool:
    """Is ``text`` a line that reports a phase when it is over, with its iteration
    ("validation loss at iteration 150", the profile's ``periodic`` rules)?"""
    return text is not None and any(rx.search(text) for _, rx in profile.periodic)
