"""A routine line in which the culprit alone names something else: the odd word.

A node set up unlike the others says so in lines that read as routine: NCCL on one node
"Using [0]docker0:172.17.0.1" where every other node uses ``ib0``, one node loading
another driver or library version.  No error word, no count out of line: only a word
that no other node printed in that line, and that healthy runs of the same
configuration never printed in it either.  The healthy runs are what make it a finding:
a role every job has (the one node that prints "master") is in their lines too.

Pure functions over a parsed job and the healthy runs' words (``l4.phases.Timeline.words``).
"""

from __future__ import annotations

import math
import re

import numpy as np

from l4.gather import host_tokens
from l4.mask import strip_prefix
from l4.merge import ParsedJob

#: words of a line: runs of two letters or more (digits, marks and single letters are
#: counts, ids and punctuation, not names)
_WORD = re.compile(r"[A-Za-z]{2,}")
#: read out before taking words: hex numbers and hashes ("0x14c3532", "05541c04-746d")
#: and dates, whose letters are no names
_NOISE = re.compile(r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F-]*\d)[0-9a-fA-F-]{6,}\b|"
                    r"\b\d{4}-\d\d-\d\dT?|\b[IWEF]\d{4}\b")
#: of the nodes, the share that must print the line (every node's routine)
SHARE = 0.75
#: nodes a job needs: with fewer, one node apart is no outlier
MIN_NODES = 4


def words_of(text: str, node: str) -> set[str]:
    """The words a node's line names, its own host names and the launcher's prefix
    ("(worker1, rank=1, pid=144184)", "[1,mpirank:3,algo-2]<stdout>:") read out."""
    text = strip_prefix(text)
    for t in sorted(host_tokens(node), key=len, reverse=True):  # "gpu-3.cluster" before "gpu-3"
        text = text.replace(t, " ")
    return set(_WORD.findall(_NOISE.sub(" ", text)))


def job_words(job: ParsedJob) -> dict[int, set[str]]:
    """Template-store id -> every word any node of the job printed in that line (first
    and last occurrence), its own host names read out: what a healthy run says."""
    out: dict[int, set[str]] = {}
    for i in range(job.n_nodes):
        for c, texts in _texts(job, i).items():
            out.setdefault(int(job.event_ids[c]), set()).update(_words(texts, job.nodes[i]))
    return out


def lone_words(job: ParsedJob, healthy: dict[int, frozenset[str]]) -> dict[int, int]:
    """Event column -> the one node that names a word in it that no other node named:
    lines (nearly) every node printed, every other node with the same words in it, and
    the lone node's new word never printed in that line by the healthy runs.  A line the
    healthy runs did not print is no routine line (the cross-job filter speaks for it).
    One pass over the nodes' copies of each line: a job of hundreds of nodes."""
    n = job.n_nodes
    if n < MIN_NODES or not healthy:
        return {}
    printed = (job.counts > 0).sum(axis=0)
    out: dict[int, int] = {}
    for c in np.nonzero(printed >= max(MIN_NODES, math.ceil(SHARE * n)))[0].tolist():
        known = healthy.get(int(job.event_ids[c]))
        if known is None or "<*>" not in job.templates[c]:
            continue
        groups: dict[frozenset[str], list[int]] = {}
        for i in np.nonzero(job.counts[:, c] > 0)[0].tolist():
            ws = frozenset(_words(_texts(job, i, c).get(c, []), job.nodes[i]))
            groups.setdefault(ws, []).append(i)
            if len(groups) > 2:
                break  # the nodes disagree among themselves: nobody is apart
        if len(groups) != 2:
            continue
        (a, na), (b, nb) = sorted(groups.items(), key=lambda kv: len(kv[1]))
        if len(na) == 1 and len(nb) >= MIN_NODES - 1 and a - b - known:
            out[c] = na[0]
    return out


def odd_words(job: ParsedJob, healthy: dict[int, frozenset[str]], node: int) -> list[int]:
    """Event columns in which ``node`` alone names something new (``lone_words``)."""
    return sorted(c for c, i in lone_words(job, healthy).items() if i == node)


def odd_node(job: ParsedJob, healthy: dict[int, frozenset[str]]) -> np.ndarray:
    """Per node: 1 for the one node that alone names something new in routine lines
    (``lone_words``); all 0 when none or several do (a split, not a culprit)."""
    out = np.zeros(job.n_nodes)
    lone = set(lone_words(job, healthy).values())
    if len(lone) == 1:
        out[lone.pop()] = 1.0
    return out


def _words(texts: list[str], node: str) -> set[str]:
    return set().union(*(words_of(t, node) for t in texts))


def _texts(job: ParsedJob, i: int, col: int | None = None) -> dict[int, list[str]]:
    """Column -> node ``i``'s first and last text of it (all columns, or one)."""
    cols = [col] if col is not None else set(job.examples[i]) | set(job.last_examples[i])
    out = {}
    for c in cols:
        parts = []
        if c in job.examples[i]:
            parts.append(job.examples[i][c][1])
        if c in job.last_examples[i]:
            parts.append(job.last_examples[i][c])
        if parts:
            out[c] = parts
    return out
