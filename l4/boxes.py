"""Reports drawn as boxes: the lines between two rules are one message, not many events.

Launchers and runtimes print their failure reports as ASCII boxes.  torchrun's
``ChildFailedError`` is followed by a box whose body ("train.py FAILED", "Failures:",
"<NO_OTHER_FAILURES>", "Root Cause (first observed failure):", "exitcode : 1 (pid: ..)",
"error_file: <N/A>", "traceback : To enable traceback see: ...") is the exception's
message; mpirun frames "Primary job terminated normally, but 1 process returned / a
non-zero exit code..." between rules of dashes.  Read line by line, one report becomes
six or eight events, each of which says little by itself and all of which the SRE must
wade through.  Read as what it is, the box is one message: its event is the line it hangs
from when that line introduces it (ends with a colon, as an exception whose message is
the box does), or else its first line; the rest is that event's context.

This is a matter of layout, not of any framework's wording: a rule is a line of one
repeated drawing character (``=``, ``-``, ``*``, ``#``, ``~``, ``_``), a box is the
records between two rules of the same character at most ``MAX_BOX`` records apart, and
a box inside a larger box (torchrun's dashes inside its ``=`` rules) belongs to the
larger one.  Everything here is a pure function over a node's record sequence (event
column of every record, in order) and the templates.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

import numpy as np

#: records between a box's two rules at most (torchrun lists 7 lines per failed local rank,
#: 8 ranks fill ~70); a longer stretch between rules is a run of
#: ordinary lines between separators, not one message
MAX_BOX = 150

_RULE = re.compile(r"^\s*([=\-*#~_])\1{7,}\s*$")


def rule_char(template: str) -> str | None:
    """The drawing character of a rule line ("=====" -> "="), None for any other line."""
    m = _RULE.match(template)
    return m.group(1) if m else None


def boxes(seq: np.ndarray, rules: dict[int, str]) -> list[tuple[int, int]]:
    """(opening rule, closing rule) record positions of the outermost boxes of one node's
    record sequence, in order.  ``rules``: event column -> its rule character.

    Rules pair as they are drawn: a rule closes the nearest open rule of its character
    (dropping any rule opened inside and never closed), and opens a box otherwise.  A rule
    left open more than ``MAX_BOX`` records is a lone separator, not a box's top."""
    if not rules or not len(seq):
        return []
    cols = np.fromiter(rules, dtype=np.int64)
    where = np.nonzero(np.isin(seq, cols))[0]
    found: list[tuple[int, int]] = []
    stack: list[tuple[int, str]] = []
    for k in where.tolist():
        ch = rules[int(seq[k])]
        stack = [(p, c) for p, c in stack if k - p <= MAX_BOX]
        for j in range(len(stack) - 1, -1, -1):
            if stack[j][1] == ch:
                found.append((stack[j][0], k))
                del stack[j:]
                break
        else:
            stack.append((k, ch))
    found.sort()
    outer: list[tuple[int, int]] = []
    for lo, hi in found:
        if outer and lo < outer[-1][1]:
            continue  # inside the box before it
        outer.append((lo, hi))
    return outer


def enclosing_box(box_list: list[tuple[int, int]], pos: int) -> tuple[int, int] | None:
    """The box of ``box_list`` (outermost boxes, in order) strictly around record ``pos``."""
    i = bisect.bisect_right(box_list, (pos, float("inf"))) - 1
    if i >= 0 and box_list[i][0] < pos < box_list[i][1]:
        return box_list[i]
    return None


def box_head(seq: np.ndarray, box_list: list[tuple[int, int]], pos: int,
             templates: Sequence[str], rules: dict[int, str]) -> int | None:
    """The event column that stands for the box around record ``pos``: the line the box
    hangs from when that line introduces it (ends with ":"), else the box's first line.
    None when ``pos`` is in no box."""
    box = enclosing_box(box_list, pos)
    if box is None:
        return None
    lo, hi = box
    if lo > 0:
        before = int(seq[lo - 1])
        if rules.get(before) is None and templates[before].rstrip().endswith(":"):
            return before
    for k in range(lo + 1, hi):
        c = int(seq[k])
        if c not in rules:
            return c
    return None


def rule_columns(templates: Sequence[str]) -> dict[int, str]:
    """Event column -> rule character, for every template that is a rule."""
    out = {}
    for c, t in enumerate(templates):
        ch = rule_char(t)
        if ch is not None:
            out[c] = ch
    return out
