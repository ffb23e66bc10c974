"""Failure-indicating events: the unusual events worth an SRE's attention, ranked.

An event qualifies when the cross-job filter kept it (healthy jobs do not explain it) and it
either reads like trouble or sits on the suspected culprit.  Events on the culprit rank
above the symptoms every victim logs; among them, wording (severity), novelty and how far
the count exceeds healthy expectations decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from l4.boxes import box_head, boxes, rule_columns
from l4.crossjob import CrossJobResult
from l4.merge import ParsedJob
from l4.oddwords import odd_words
from l4.phases import Timeline
from l4.severity import is_boilerplate, is_field, speaks_for_itself
from l4.spatial import NodeScore, odd_cells

MAX_EVENTS = 25
MAX_EXAMPLES = 3


@dataclass
class Indicator:
    event_id: int
    template: str
    score: float
    nodes: list[str]
    count: int
    examples: list[dict] = field(default_factory=list)
    symptom: bool = False


def select_events(job: ParsedJob, cross: CrossJobResult, ranked: list[NodeScore],
                  max_events: int = MAX_EVENTS, timeline: Timeline | None = None) -> list[Indicator]:
    """Rank the kept events (see module docstring); ``timeline`` (what healthy runs
    printed) adds the routine lines in which the culprit alone names something new."""
    if not ranked or not cross.kept.any():
        return []
    row = {n: i for i, n in enumerate(job.nodes)}
    top = row[ranked[0].node]
    top_set = {row[s.node] for s in ranked[: min(3, len(ranked))] if s.score > 0}
    n = max(job.n_nodes, 1)
    out: list[Indicator] = []
    for c in np.nonzero(cross.kept)[0].tolist():
        if is_boilerplate(job.templates[c]):
            continue  # a traceback header or a rule of dashes: context, not an event
        anom_nodes = np.nonzero(cross.anomalous[:, c])[0]
        sev = float(cross.severity[c])
        on_top = bool(cross.anomalous[top, c])
        share = len(anom_nodes) / n
        if sev <= 0 and not (on_top and share <= 0.5 and cross.novel[c]
                             and not is_field(job.templates[c])):
            # a routine-looking line new on the culprit may be its own wording of the
            # cause; a field of a report ("host : <*>", "rank : <*>") is not, by itself
            continue
        if sev < 0.5 and not (on_top and share <= 0.5):
            # a line that does not read like trouble (a warning) counts only where it sets
            # the culprit apart: one that every node printed, and the healthy runs did not
            # (a library of another version warns of a deprecation), says the job differs
            continue
        excess = float(cross.excess[anom_nodes, c].max()) if len(anom_nodes) else 0.0
        score = (0.3 + sev) * (1.0 if cross.novel[c] else 0.75) * (1.0 + np.log1p(excess) / 10)
        if on_top:
            score *= 2.0
        elif set(anom_nodes.tolist()) & top_set:
            score *= 1.4
        symptom = (not on_top) and share >= 0.5
        present = np.nonzero(job.counts[:, c])[0]
        ordered = sorted(present.tolist(), key=lambda i: (i != top, i not in top_set, job.nodes[i]))
        examples = []
        for i in ordered[:MAX_EXAMPLES]:
            ex = job.examples[i].get(c)
            if ex is None:
                continue
            line, text, ctx = ex
            where, line = job.locate(i, int(job.first_pos[i, c]), int(line))
            item = {"file": where, "line": line, "node": job.nodes[i], "text": text}
            if ctx:
                item["context"] = ctx
            examples.append(item)
        out.append(
            Indicator(
                event_id=int(job.event_ids[c]),
                template=job.templates[c],
                score=round(float(score), 4),
                nodes=[job.nodes[i] for i in present.tolist()],
                count=int(job.counts[:, c].sum()),
                examples=examples,
                symptom=symptom,
            )
        )
    out = fold_boxes(job, out)
    out.extend(_odd_on(job, top, {e.event_id for e in out}))
    if timeline is not None:
        out.extend(_odd_named(job, top, {e.event_id for e in out}, timeline))
    out.sort(key=lambda e: (-e.score, e.template))
    return out[:max_events]


def fold_boxes(job: ParsedJob, events: list[Indicator]) -> list[Indicator]:
    """Drop the events that are lines of a boxed report (``l4.boxes``) that another line
    stands for: the report is one message, and its other lines become the context of the
    event that stands for it (when that one is reported).  A line in the box that speaks
    for itself (a quoted exception, a named cause) stays an event: torchrun's box carries
    the dead rank's own exception, sometimes the only copy of it in the logs."""
    rules = rule_columns(job.templates)
    if not rules:
        return events
    col = {int(e): c for c, e in enumerate(job.event_ids)}
    row = {n: i for i, n in enumerate(job.nodes)}
    node_boxes: dict[int, list[tuple[int, int]]] = {}
    by_col = {col[e.event_id]: e for e in events if e.event_id in col}
    folded: dict[int, list[str]] = {}
    keep = []
    for e in events:
        c = col.get(e.event_id)
        if c is None or not e.examples or speaks_for_itself(e.template):
            keep.append(e)
            continue
        i = row[e.examples[0]["node"]]
        if i not in node_boxes:
            node_boxes[i] = boxes(job.seqs[i], rules)
        head = box_head(job.seqs[i], node_boxes[i], int(job.first_pos[i, c]), job.templates, rules)
        if head is None or head == c:
            keep.append(e)
            continue
        folded.setdefault(head, []).append(e.examples[0]["text"])
    kept = {e.event_id for e in keep}
    for head, texts in folded.items():
        e = by_col.get(head)
        if e is not None and e.event_id in kept and e.examples:
            ctx = e.examples[0].setdefault("context", [])
            ctx.extend(t for t in texts if t not in ctx)
    return keep


#: score of a measurement that singles out the culprit: above the symptoms every victim
#: logs, below an error the culprit printed itself
ODD_SCORE = 2.0


def _odd_named(job: ParsedJob, top: int, have: set[int], timeline: Timeline) -> list[Indicator]:
    """The culprit's routine lines that name what no other node and no healthy run named
    in them (``l4.oddwords``): "Using [0]docker0" where every node uses ib0."""
    out = []
    for c in odd_words(job, timeline.words, top):
        if int(job.event_ids[c]) in have or c not in job.examples[top]:
            continue
        line, text, _ = job.examples[top][c]
        out.append(_culprit_line(job, top, c, int(job.first_pos[top, c]), int(line), text))
    return out


def _odd_on(job: ParsedJob, top: int, have: set[int]) -> list[Indicator]:
    """The culprit's routine lines whose last measured values stand apart from every other
    node's (``l4.spatial.odd_cells``): a straggler prints no error, only a step time ten
    times the others'.  That line, as the culprit last printed it, is what shows it."""
    out = []
    for c in sorted({c for i, c, _ in odd_cells(job) if i == top}):
        if int(job.event_ids[c]) in have or c not in job.last_examples[top]:
            continue
        last = int(job.last_pos[top, c]) if job.last_pos is not None else 0
        out.append(_culprit_line(job, top, c, last, int(job.last_line[top, c]),
                                 job.last_examples[top][c]))
    return out


def _culprit_line(job: ParsedJob, top: int, c: int, pos: int, line: int, text: str) -> Indicator:
    """One routine line of the culprit's that singles it out, as an event with that one
    example (``pos`` / ``line``: where in its stream and file)."""
    where, line = job.locate(top, pos, line)
    return Indicator(event_id=int(job.event_ids[c]), template=job.templates[c], score=ODD_SCORE,
                     nodes=[job.nodes[top]], count=int(job.counts[top, c]),
                     examples=[{"file": where, "line": line, "node": job.nodes[top], "text": text}])
