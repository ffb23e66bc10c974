"""The baselines of the L4 paper, as plain functions over a job directory.

They are what an SRE does by hand, and what the accuracy benchmark compares l4 against:

* :func:`error_time_ranking` -- suspect the node whose first error-level line is earliest;
* :func:`error_count_ranking` -- suspect the node that printed the most error-level lines;
* :func:`error_level_events` -- report every distinct (masked) error-level line as an event.

"Error-level" follows the paper's keyword heuristic: a line carrying a level word
(ERROR/FATAL/CRITICAL, Slurm's ``error:``), ``Exception``, ``Error:`` (``RuntimeError:``...),
``Traceback``, the word ``failed``, or a glog error severity (``[E0321 ...]`` /
``[E ProcessGroupNCCL...``).
Files are streamed line by line; nothing but counters and a few examples is kept.

Timestamps: the first timestamp found on a line (ISO-like, glog, ctime, syslog); a line
without one inherits the last timestamp seen earlier in the same file (that is how a reader
dates a traceback).  A file stored by a container runtime or a collector is read as the
program printed it, each line dated by when it was written (``l4.wrapped``), as a log
viewer shows it.  A node whose error lines precede every timestamp is ranked after
nodes with a dated error.  Ties go to the earlier line, then to the node listed first.
"""

from __future__ import annotations

import calendar
import gzip
import math
import re
import time
from collections.abc import Iterator
from pathlib import Path

from l4.ingest import NodeFile, ReadStats, discover
from l4.wrapped import read_unwrapped, sniff_file

__all__ = [
    "ERROR_RE",
    "error_count_ranking",
    "error_level_events",
    "error_time_ranking",
    "is_error_line",
]

ERROR_RE = re.compile(
    r"\b(?:ERROR|FATAL|CRITICAL)\b|\berror:|Exception|Error:|\[Error\]|Traceback|\b[Ff]ailed\b"
    r"|FAILED|\[E(?:\d{3,4} \d\d:| )"
)

_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T _\-](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
_GLOG = re.compile(r"\[[EWIF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?")
_CTIME = re.compile(r"\b([A-Z][a-z]{2}) ([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{4})\b")
_SYSLOG = re.compile(r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) ")


# Every match of ERROR_RE contains one of these; plain substring tests are ~50x cheaper
# than the regex on the long, error-free lines that make up most of a log.
_NEEDLES = ("ERROR", "FATAL", "CRITICAL", "rror", "Exception", "Traceback", "ailed", "FAILED", "[E")


def is_error_line(line: str) -> bool:
    """True when ``line`` is error-level by the paper's keyword heuristic."""
    for needle in _NEEDLES:
        if needle in line:
            return ERROR_RE.search(line) is not None
    return False


def _epoch(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: str | None) -> float:
    t = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    return t + (int(frac) / 10 ** len(frac) if frac else 0.0)


def line_time(line: str, year: int | None) -> tuple[float | None, bool]:
    """(epoch seconds of the first timestamp of ``line``, whether it carried a year).

    ``year`` completes year-less stamps (glog, syslog); without it they are ignored.
    """
    head = line[:240]
    m = _ISO.search(head)
    if m:
        y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
        if 1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 62:
            return _epoch(y, mo, d, h, mi, s, m.group(7)), True
    m = _CTIME.search(head)
    if m and m.group(2) in _MONTHS:
        return _epoch(int(m.group(7)), _MONTHS[m.group(2)], int(m.group(3)), int(m.group(4)),
                      int(m.group(5)), int(m.group(6)), None), True
    if year is None:
        return None, False
    m = _GLOG.search(head)
    if m:
        mo, d, h, mi, s = (int(g) for g in m.groups()[:5])
        if 1 <= mo <= 12 and 1 <= d <= 31:
            return _epoch(year, mo, d, h, mi, s, m.group(6)), False
    m = _SYSLOG.search(head)
    if m and m.group(1) in _MONTHS:
        return _epoch(year, _MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)),
                      int(m.group(4)), int(m.group(5)), None), False
    return None, False


def _lines(path: Path) -> Iterator[str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                yield line.rstrip("\r\n")
    except (OSError, EOFError):
        return  # a truncated/corrupt file: what was read so far counts


def _scan(job_dir: str | Path, timed: bool = False
          ) -> Iterator[tuple[int, str, str, Iterator[tuple[int, float | None, str]]]]:
    """(node order, node, rel path, stream of (line no, time, text) of error-level lines).

    Times are only parsed when ``timed`` (they cost a few regexes per line).
    """
    spec = discover(job_dir)
    for order, nf in enumerate(spec.files):
        yield order, nf.node, nf.rel, _errors_of(nf, timed)


def _numbered(nf: NodeFile) -> Iterator[tuple[int, str, float]]:
    """(line number, line, write time or nan) of each line of a node file.  A file stored
    by a container runtime or a collector is read as the program printed it, with the
    time each line was written (``l4.wrapped``): what an SRE reads in a log viewer."""
    if not (nf.record_node or sniff_file(nf.path)):
        for ln, line in enumerate(_lines(nf.path), 1):
            yield ln, line, math.nan
        return
    for block, stamps, nos in read_unwrapped(nf.path, ReadStats(), select=nf.record_node or None):
        lines = block.decode("utf-8", errors="replace").split("\n")[:-1]
        yield from zip(nos.tolist(), lines, stamps.tolist(), strict=True)


def _errors_of(nf: NodeFile, timed: bool) -> Iterator[tuple[int, float | None, str]]:
    last: float | None = None
    year: int | None = None
    for ln, line, stamp in _numbered(nf):
        if timed and stamp == stamp:
            last = stamp
        elif timed:
            t, has_year = line_time(line, year)
            if t is not None:
                last = t
                if has_year:
                    year = time.gmtime(t).tm_year
        if is_error_line(line):
            yield ln, last, line


def error_time_ranking(job_dir: str | Path) -> list[str]:
    """Nodes ordered by the time of their first error-level line (earliest first).

    Nodes without any error-level line come last, in listing order.
    """
    best: dict[str, tuple] = {}  # a node of several files: its earliest first error
    for order, node, _rel, errors in _scan(job_dir, timed=True):
        first = next(errors, None)  # the file is read only up to its first error line
        if first is None:
            key = (2, math.inf, math.inf, order)
        elif first[1] is None:
            key = (1, math.inf, first[0], order)
        else:
            key = (0, first[1], first[0], order)
        best[node] = min(best.get(node, key), key)
    return sorted(best, key=lambda node: best[node])


def error_count_ranking(job_dir: str | Path) -> list[str]:
    """Nodes ordered by their number of error-level lines (most first; ties: listing order)."""
    counts: dict[str, list[int]] = {}  # node -> [-errors, listing order]
    for order, node, _rel, errors in _scan(job_dir):
        c = counts.setdefault(node, [0, order])
        c[0] -= sum(1 for _ in errors)
    return sorted(counts, key=lambda node: counts[node])


def _mask_fns():
    """(mask, cache key): masking ignores which digit is where, so lines that differ only in
    their digits share one masking (the key maps every digit to 0)."""
    table = str.maketrans("123456789", "000000000")

    def collapse(text: str) -> str:
        return text.translate(table)

    try:
        from l4.mask import mask_line
    except ImportError:  # pragma: no cover - the project ships l4.mask
        return fallback_mask, collapse
    return mask_line, collapse


_FB_RULES = (
    (re.compile(r"0x[0-9a-fA-F]+"), "<*>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b"), "<*>"),
    (re.compile(r"[\w.+\-]*\d[\w.+\-]*"), "<*>"),
    (re.compile(r"\s+"), " "),
)


def fallback_mask(line: str) -> str:
    """Digits/hex masking used when :mod:`l4.mask` is unavailable."""
    for rx, repl in _FB_RULES:
        line = rx.sub(repl, line)
    return line.strip()


def error_level_events(job_dir: str | Path, max_examples: int = 3) -> list[dict]:
    """Every distinct masked template of error-level lines, most frequent first.

    Each event is ``{"template", "nodes", "count", "examples"}``; examples carry
    ``file``/``line``/``node``/``text`` like l4's report.
    """
    mask, collapse = _mask_fns()
    events: dict[str, dict] = {}
    cache: dict[str, str] = {}
    for _order, node, rel, errors in _scan(job_dir):
        for ln, _t, line in errors:
            key = collapse(line)
            tmpl = cache.get(key)
            if tmpl is None:
                tmpl = mask(line)
                if len(cache) < 200_000:
                    cache[key] = tmpl
            ev = events.get(tmpl)
            if ev is None:
                ev = events[tmpl] = {"template": tmpl, "nodes": set(), "count": 0, "examples": []}
            ev["count"] += 1
            ev["nodes"].add(node)
            if len(ev["examples"]) < max_examples:
                ev["examples"].append({"file": rel, "line": ln, "node": node, "text": line})
    out = []
    for ev in events.values():
        ev["nodes"] = sorted(ev["nodes"])
        out.append(ev)
    out.sort(key=lambda e: (-e["count"], e["template"]))
    return out
