"""Gathered output: one node's log that holds every node's lines, each tagged with its origin.

mpirun's ``--tag-output`` (as SageMaker runs it) writes all ranks' lines into the first
host's log, each behind ``[1,mpirank:22,algo-6]<stderr>:``; pdsh and clush write
``worker-3: ...``.  The other hosts' own files then hold a few launcher lines.  Read as
they are, the first host looks like the culprit (it printed every error), and the node that
failed has no timeline of its own to find the stage or the iteration in.

The tag says who printed the line ("who names whom"), so such a file is split by origin
before scanning: node ``algo-6`` is its own file followed by the lines tagged ``algo-6``
in the gatherer (``NodeFile.origin``); the gatherer keeps its untagged lines and those it
tagged itself (``NodeFile.routed`` lists the nodes whose lines it gives away).  Line
numbers stay those of the file the line is in, so every example still points at the right
place.  Only tags that name a node of the job (its id or short host name) route a line:
a tag that names nobody known stays where it is.

Detection reads the first :data:`SAMPLE_BYTES` of each file; splitting costs one pass of a
C-level regular expression over the gatherer per node it names.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import numpy as np

from l4.ingest import NodeFile, open_regular
from l4.timeparse import parse_ts
from l4.wrapped import unwrap_head

#: bytes read from the head of each file to decide whether it gathers other nodes' lines
SAMPLE_BYTES = 1 << 20
#: a gatherer names other nodes of the job in at least this many of its sampled lines, at
#: the start of the line in a tag (a rank's lines in the gatherer may be few: Hugging
#: Face's Trainer has every rank but the first print nothing while it trains)
MIN_TAGGED_LINES = 3

# a leading origin group: "[1,mpirank:22,algo-6]<stderr>:", "[worker-3] ", "(worker-3) "
_LEAD_GROUP = re.compile(rb"^[\[(]([^\]\)\n]{1,160})[\])](?:[ \t]|<std(?:out|err)>:)", re.M)
# pdsh / clush: "worker-3: msg"
_LEAD_HOST = re.compile(rb"^([A-Za-z][\w.-]{2,}):[ \t]", re.M)
_TOKEN = re.compile(rb"[A-Za-z][\w.-]{2,}")
# a progress bar's later updates: tqdm rewrites its line with "\r", so only the first update
# carries the tag; l4.ingest.read_blocks makes each update a line of its own
_BAR = re.compile(rb"\d%\||\d+/\d+ \[")


def host_tokens(node: str) -> set[str]:
    """The words a line names a node by: its id and its short host name (``gpu-3.cluster``
    -> ``gpu-3``), three characters or more and not a bare number."""
    return {t for t in (node, node.split(".")[0]) if len(t) >= 3 and not t.isdigit()}


def node_names(nodes: list[str]) -> dict[bytes, str]:
    """Token -> node, as bytes (:func:`host_tokens`)."""
    return {t.encode("utf-8", "surrogateescape"): node for node in nodes for t in host_tokens(node)}


def _origin(group: bytes, names: dict[bytes, str]) -> str | None:
    for token in _TOKEN.findall(group):
        node = names.get(token)
        if node is not None:
            return node
    return None


def tagged_lines(block: bytes, names: dict[bytes, str]) -> tuple[np.ndarray, list[str | None]]:
    """(line index, origin node) of every line of ``block`` with a leading tag; the origin
    is None when the tag names no node of ``names``."""
    starts: list[int] = []
    origins: list[str] = []
    seen: dict[bytes, str | None] = {}
    for rx in (_LEAD_GROUP, _LEAD_HOST):
        for m in rx.finditer(block):
            group = m.group(1)
            node = seen.get(group, "")
            if node == "":
                node = seen[group] = _origin(group, names)
            if node is not None or rx is _LEAD_GROUP:
                starts.append(m.start())
                origins.append(node)
    if not starts:
        return np.zeros(0, np.int64), []
    nl = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    idx = np.searchsorted(nl, np.asarray(starts, np.int64), side="left")
    order = np.argsort(idx, kind="stable")
    return idx[order], [origins[i] for i in order.tolist()]


def gathered_nodes(nf: NodeFile, names: dict[bytes, str]) -> set[str]:
    """The other nodes whose lines ``nf`` gathers, judged from its head; empty for a plain
    node file."""
    try:
        with open_regular(nf.path) as fh:
            head = fh.read(SAMPLE_BYTES)
    except OSError:
        return set()
    if nf.path.name.endswith(".gz") or b"\x00" in head[:4096]:
        return set()  # compressed or binary: read only by the scanner
    cut = head.rfind(b"\n")
    head = unwrap_head(head[: cut + 1] if cut >= 0 else head)
    _, origins = tagged_lines(head, names)
    others = [o for o in origins if o is not None and o != nf.node]
    if len(others) < MIN_TAGGED_LINES:
        return set()
    return set(others)


def split_gathered(files: list[NodeFile]) -> tuple[list[NodeFile], list[str]]:
    """``files`` with each gatherer split by origin (see module docstring), and a warning
    per gatherer saying what was split."""
    if len(files) < 2:
        return files, []
    names = node_names([f.node for f in files])
    out = list(files)
    notes = []
    for k, nf in enumerate(files):
        if nf.origin or nf.routed:
            continue
        nodes = gathered_nodes(nf, names)
        if not nodes:
            continue
        routed = tuple(sorted(nodes))
        out[k] = replace(nf, routed=routed)
        out.extend(replace(nf, node=node, origin=node) for node in routed)
        notes.append(f"{nf.rel}: holds the tagged output of {len(routed)} other node(s); "
                     f"their lines are read as theirs")
    return out, notes


@dataclass(frozen=True)
class TagPattern:
    """Leading tags that name some nodes (by id or short host name).  For one node, its
    names are found by a literal search (C's memmem) and each hit is checked to begin its
    line as a tag, so Python sees only that node's lines; for several, every leading tag
    is read once."""

    tokens: tuple[bytes, ...]
    nodes: frozenset[str]
    tag: re.Pattern[bytes]

    def lines(self, block: bytes, starts: np.ndarray, names: dict[bytes, str]) -> np.ndarray:
        """Indices of the lines of ``block`` (their ``starts``) that begin with such a tag."""
        if len(self.nodes) > 1:
            idx, origins = tagged_lines(block, names)
            return idx[np.fromiter((o in self.nodes for o in origins), bool, len(origins))] \
                if len(idx) else idx
        found = []
        for t in self.tokens:
            k = block.find(t)
            while k >= 0:
                found.append(k)
                k = block.find(t, k + 1)
        if not found:
            return np.zeros(0, np.int64)
        rows = np.unique(np.searchsorted(starts, np.asarray(found, np.int64), side="right") - 1)
        return np.array([r for r in rows.tolist() if self.tag.match(block, int(starts[r]))],
                        dtype=np.int64)


def tag_pattern(nodes: list[str]) -> TagPattern:
    """The :class:`TagPattern` of ``nodes``."""
    tokens = sorted({t for n in nodes for t in host_tokens(n)}, key=len, reverse=True)
    raw = tuple(t.encode("utf-8", "surrogateescape") for t in tokens)
    name = rb"(?<![\w.-])(?:" + b"|".join(re.escape(t) for t in raw) + rb")(?![\w.-])"
    return TagPattern(
        tokens=raw, nodes=frozenset(nodes),
        tag=re.compile(rb"(?:[\[(][^\]\)\n]{0,160}?" + name + rb"[^\]\)\n]{0,160}[\])]"
                       rb"(?:[ \t]|<std(?:out|err)>:)|" + name + rb":[ \t])"))


def line_index(block: bytes) -> tuple[np.ndarray, np.ndarray, int]:
    """(start offset, end offset, count) of the lines of ``block``: computed once per block
    and handed to :func:`select`, :func:`implied_times` and :func:`sub_block`."""
    nl = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    ends = nl if block.endswith(b"\n") else np.append(nl, len(block))
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    return starts, ends, len(ends)


def select(block: bytes, nf: NodeFile, tags: TagPattern, names: dict[bytes, str],
           lines: tuple[np.ndarray, np.ndarray, int]) -> tuple[np.ndarray, np.ndarray] | None:
    """(indices of the lines of ``block`` that belong to ``nf``'s stream, which of them
    carry no origin tag): with ``nf.origin``, the lines tagged with that node; with
    ``nf.routed``, every line but those tagged with one of them.  None: every line (a
    plain node file).  ``tags``: :func:`tag_pattern` of the origin, or of the routed nodes;
    ``lines``: :func:`line_index` of the block.

    An untagged progress-bar update right after a tagged line goes with it.  The other
    untagged lines of a gatherer are the gathering process's own (mpirun, a launcher
    toolkit): its reports on the job, not a rank's output."""
    if not (nf.origin or nf.routed):
        return None
    if nf.origin and not any(block.find(t) >= 0 for t in names if names[t] == nf.origin):
        # the node printed nothing in this block (while a job trains, only the first
        # rank reports): one pass of C over it, no regular expression per line
        return np.zeros(0, np.int64), np.zeros(0, bool)
    starts, ends, n = lines
    rows = tags.lines(block, starts, names)
    tagged = np.zeros(n, bool)
    if len(rows):
        tagged[rows] = True
        # a bar's later updates, untagged, right after a tagged line are that line's
        for i in np.flatnonzero(tagged).tolist():
            j = i + 1
            while j < n and not tagged[j] and block[starts[j]:starts[j] + 1] not in (b"[", b"(") \
                    and _BAR.search(block, starts[j], ends[j]):
                tagged[j] = True
                j += 1
    if nf.origin:
        keep = np.flatnonzero(tagged)
        return keep, np.zeros(len(keep), bool)
    keep = np.flatnonzero(~tagged)
    untagged = np.fromiter(
        (not _LEAD_GROUP.match(block, s) and _origin_of_host(block, s, names) is None
         for s in starts[keep].tolist()), bool, len(keep))
    return keep, untagged


def _origin_of_host(block: bytes, start: int, names: dict[bytes, str]) -> str | None:
    m = _LEAD_HOST.match(block, start)
    return names.get(m.group(1)) if m else None


def sub_block(block: bytes, keep: np.ndarray, lines: tuple[np.ndarray, np.ndarray, int]) -> bytes:
    """The lines ``keep`` of ``block`` (``lines``: its :func:`line_index`), each ending in a
    newline."""
    if not len(keep):
        return b""
    starts, ends, _ = lines
    parts = [block[s:e] for s, e in zip(starts[keep].tolist(), ends[keep].tolist(), strict=True)]
    return b"\n".join(parts) + b"\n"


_CLOCK = re.compile(rb"\d\d:\d\d:\d\d")
#: lines looked back for the last timed one before an untimed line
LOOK_BACK = 400


def _time_of(block: bytes, s: int, e: int) -> float:
    if not _CLOCK.search(block, s, min(e, s + 200)):
        return math.nan
    return parse_ts(block[s:min(e, s + 200)].decode("utf-8", "replace"))


def implied_times(block: bytes, keep: np.ndarray, clock: float,
                  lines: tuple[np.ndarray, np.ndarray, int]) -> tuple[np.ndarray, float]:
    """(for each kept line of ``block``: the time of the last timed line of the file at or
    before it, the time to carry into the next block).  One process wrote the gatherer's
    file in the order the lines arrived, so an untimed line (a traceback) happened after
    the timed line before it: that is its time, as the file's clock tells it (``clock``:
    the last one of the blocks before; nan when none).  Lines are read back at most
    :data:`LOOK_BACK` lines; only the kept lines' and those they look back to are parsed."""
    starts, ends, n = lines
    known: dict[int, float] = {}

    def at(i: int) -> float:
        if i not in known:
            known[i] = _time_of(block, int(starts[i]), int(ends[i]))
        return known[i]

    def before(i: int) -> float:
        for j in range(i, max(-1, i - LOOK_BACK), -1):
            t = at(j)
            if not math.isnan(t):
                return t
        return clock if i < LOOK_BACK else math.nan

    out = np.array([before(i) for i in keep.tolist()], dtype=np.float64)
    carry = before(n - 1) if n else clock
    return out, (clock if math.isnan(carry) else carry)
