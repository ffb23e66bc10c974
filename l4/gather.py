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
from dataclasses import replace

import numpy as np

from l4.ingest import NodeFile, open_regular
from l4.timeparse import parse_ts

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


def node_names(nodes: list[str]) -> dict[bytes, str]:
    """Token -> node: every node's id and its short host name (``gpu-3.cluster`` -> ``gpu-3``)."""
    out: dict[bytes, str] = {}
    for node in nodes:
        for token in {node, node.split(".")[0]}:
            if len(token) >= 3 and not token.isdigit():
                out[token.encode("utf-8", "surrogateescape")] = node
    return out


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
    head = head[: cut + 1] if cut >= 0 else head
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


def select(block: bytes, nf: NodeFile,
           names: dict[bytes, str]) -> tuple[np.ndarray, np.ndarray] | None:
    """(indices of the lines of ``block`` that belong to ``nf``'s stream, which of them
    carry no origin tag): with ``nf.origin``, the lines tagged with that node; with
    ``nf.routed``, every line but those tagged with one of them.  None: every line (a
    plain node file).

    An untagged progress-bar update right after a tagged line goes with it.  The other
    untagged lines of a gatherer are the gathering process's own (mpirun, a launcher
    toolkit): its reports on the job, not a rank's output."""
    if not (nf.origin or nf.routed):
        return None
    if nf.origin and not any(block.find(t) >= 0 for t in names if names[t] == nf.origin):
        # the node printed nothing in this block (while a job trains, only the first
        # rank reports): one pass of C over it, no regular expression per line
        return np.zeros(0, np.int64), np.zeros(0, bool)
    idx, origins = tagged_lines(block, names)
    n = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
    owner = np.full(n, -1, np.int64)  # -1 untagged, 1 wanted (origin) / routed away, 0 other
    want = {nf.origin} if nf.origin else set(nf.routed)
    if len(idx):
        owner[idx] = np.fromiter((1 if o in want else 0 for o in origins), np.int64, len(origins))
        idx = idx[:0]
    bars = [m.start() for m in _BAR.finditer(block)]
    if bars and (owner >= 0).any():
        nl = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
        for i in np.unique(np.searchsorted(nl, np.asarray(bars, np.int64))).tolist():
            if 0 < i < n and owner[i] == -1 and owner[i - 1] >= 0:
                owner[i] = owner[i - 1]
    keep = np.flatnonzero(owner == 1) if nf.origin else np.flatnonzero(owner != 1)
    return keep, owner[keep] == -1


def sub_block(block: bytes, keep: np.ndarray) -> bytes:
    """The lines ``keep`` of ``block``, each ending in a newline."""
    if not len(keep):
        return b""
    nl = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    ends = np.append(nl, len(block)) if not block.endswith(b"\n") else nl
    starts = np.concatenate(([0], ends[:-1] + 1))
    parts = [block[s:e] for s, e in zip(starts[keep].tolist(), ends[keep].tolist(), strict=True)]
    return b"\n".join(parts) + b"\n"


_CLOCK = re.compile(rb"\d\d:\d\d:\d\d")


def implied_times(block: bytes, n: int, clock: float) -> tuple[np.ndarray, float]:
    """(per line of ``block``: the time of the last timed line at or before it, the time
    to carry into the next block).  One process wrote the gatherer's file in the order
    the lines arrived, so an untimed line (a traceback) happened after the timed line
    before it: that is its time, as the file's clock tells it (``clock``: the last one of
    the blocks before; nan when none)."""
    out = np.full(n, np.nan)
    nl = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    starts = np.concatenate(([0], nl + 1))
    last = -1
    for m in _CLOCK.finditer(block):
        i = int(np.searchsorted(nl, m.start(), side="left"))
        if i == last or i >= n:
            continue
        last = i
        end = int(nl[i]) if i < len(nl) else len(block)
        ts = parse_ts(block[int(starts[i]): end][:200].decode("utf-8", "replace"))
        if not math.isnan(ts):
            out[i] = ts
    if math.isnan(out[0]) if n else False:
        out[0] = clock
    # forward fill
    idx = np.where(~np.isnan(out), np.arange(n), -1)
    np.maximum.accumulate(idx, out=idx)
    filled = np.where(idx >= 0, out[np.maximum(idx, 0)], np.nan)
    carry = float(filled[-1]) if n and not math.isnan(filled[-1]) else clock
    return filled, carry
