"""Logs as a container runtime stores them: each line wrapped with the time it was written.

On Kubernetes and Docker a training job's output is rarely read as the program printed it.
The runtime's log file, and what most collectors ship from it, wraps every line:

- **CRI** (containerd, CRI-O; ``/var/log/pods/**``)::

      2025-04-18T10:18:37.123456789Z stderr F [rank3]: Traceback (most recent call last):

  ``F`` ends a line, ``P`` is a piece of a longer one that the next record continues;
- **Docker's json-file driver**::

      {"log":"[rank3]: Traceback (most recent call last):\\n","stream":"stderr","time":"..."}

  a ``log`` that does not end in a newline is a piece the next record continues;
- **kubectl logs --timestamps**: the line after its RFC 3339 write time and a space;
- **a collector's JSON** (Fluent Bit, an Elasticsearch or Loki export, ``journalctl -o
  json``): one object per line, the line under ``log``/``message``/``MESSAGE``/``msg``
  and its time under ``time``/``@timestamp``/``__REALTIME_TIMESTAMP``/...; a structured
  logger's own fields (the step, the loss) are kept after the message as ``key=value``.

Read as they are, the wrapper is the first thing on every line: a traceback's "  File"
line no longer starts with a space, a rank's "[rank3]:" tag is no longer where a launcher
puts it, and JSON escapes change the words.  Every other part of l4 reads the program's
own line, so the file is unwrapped as it streams (``Unwrapper``) and the runtime's write
time, one clock for every line of the node, is kept beside each line (``stamps``): an
untimed traceback or counter line gets the time it was written.

A file is read as wrapped when its first non-blank lines are (``sniff``).  A bare RFC 3339
time must lead every one of them, with kubectl's nanoseconds: a framework that starts its
own lines with a timestamp prints milli- or microseconds, and a traceback's lines bare, and
its file is left as it is (read as wrapped on one node and not on another, the same line
would be two events).  Lines that do not carry the wrapper (a progress bar's
carriage-return updates split off a record) are passed on unchanged with the time of the
record before them.
"""

from __future__ import annotations

import calendar
import json
import math
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from l4.ingest import ReadStats, cut_long_lines, raw_stream, read_blocks, split_bar_glue
from l4.timeparse import YEARLESS_MAX, parse_ts

#: how many non-blank lines at a file's head decide whether it is wrapped
SNIFF_LINES = 20
#: ... at the least, for a bare timestamp (a shorter file is read as it is)
SNIFF_MIN = 3
#: the share of them a runtime's own format (CRI, Docker) must wrap
SNIFF_SHARE = 0.8
#: fraction digits of a time kubectl wrote (RFC 3339 with nanoseconds, trailing zeros
#: trimmed: 7 or more but for one line in a thousand)
NANO_DIGITS = 7

_RFC3339 = rb"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(?:Z|[+-]\d\d:\d\d)"
_CRI = re.compile(rb"^(" + _RFC3339 + rb") (?:stdout|stderr) ([FP]) ?(.*)$", re.S)
_STAMPED = re.compile(rb"^(" + _RFC3339 + rb") (.*)$", re.S)
_DOCKER = re.compile(rb'^\{\s*"log"\s*:\s*"((?:[^"\\]|\\.)*)"')
_DOCKER_TIME = re.compile(rb'"time"\s*:\s*"(' + _RFC3339 + rb')"')
_DOCKER_HEAD = re.compile(rb'^\{\s*"log"\s*:\s*"')

FORMATS = ("cri", "docker", "json", "stamped")

#: a JSON record's text, by the names collectors give it (Fluent Bit and Docker "log",
#: Elasticsearch/Loki/Vector exports "message", journald's "MESSAGE", zap/logrus "msg")
JSON_TEXT = ("log", "message", "MESSAGE", "msg", "line")
#: ... and its time (journald: microseconds since the epoch, as a string)
JSON_TIME = ("time", "@timestamp", "timestamp", "ts", "__REALTIME_TIMESTAMP", "date")


def _json_record(line: bytes) -> dict | None:
    """The JSON object on ``line`` that holds a text field (``JSON_TEXT``), or None."""
    if not line.lstrip().startswith(b"{"):
        return None
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeError, RecursionError):
        return None
    if isinstance(obj, dict) and any(isinstance(obj.get(k), str) for k in JSON_TEXT):
        return obj
    return None


#: a record's fields that say where it was collected, not what the program said
JSON_META = frozenset({"stream", "kubernetes", "docker", "container", "container_name",
                       "container_id", "pod", "pod_name", "namespace", "host", "hostname",
                       "source", "tag", "agent", "ecs", "input", "fields", "labels", "log",
                       "file", "offset", "cursor", "PRIORITY", "SYSLOG_FACILITY",
                       "SYSLOG_IDENTIFIER", "SYSLOG_PID", "SYSLOG_TIMESTAMP"})


def _fields(obj: dict, text_key: str) -> str:
    """The program's own fields beside its message, as ``key=value``: a structured logger
    (zap, structlog) keeps the step and the loss there.  Collectors' metadata (nested
    objects, ``_``/``@`` fields, ``JSON_META``) and the time are left out."""
    out = []
    for k, v in obj.items():
        if (k == text_key or k in JSON_TIME or k in JSON_META or k.startswith(("_", "@"))
                or isinstance(v, bool) or not isinstance(v, str | int | float)):
            continue
        out.append(f"{k}={v}")
    return " ".join(out)


#: the node a collector's record came from, by the names collectors give it (dotted: nested)
JSON_NODE = ("kubernetes.pod_name", "kubernetes.pod.name", "kubernetes.host", "labels.pod",
             "pod", "pod_name", "host.name", "host", "hostname", "_HOSTNAME", "node",
             "nodename")


def record_node(obj: dict) -> str | None:
    """The node ``obj`` (a collector's record) names, or None."""
    for key in JSON_NODE:
        v: object = obj
        for part in key.split("."):
            v = v.get(part) if isinstance(v, dict) else None
        if isinstance(v, str) and v:
            return v
    return None


def _json_time(value: object) -> float:
    """Epoch seconds of a collector's time field: an RFC 3339 (or other printed) time, or a
    number since the epoch in s, ms, us or ns (by its size)."""
    if isinstance(value, str):
        if value.isdigit():
            value = int(value)
        else:
            t = parse_ts(value)
            return t if t == t and t > YEARLESS_MAX else math.nan
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return math.nan
    v = float(value)
    while v > 1e11:  # ms, us, ns: an epoch in seconds stays below 1e11 until the year 5138
        v /= 1000.0
    return v


def _is(kind: str, line: bytes) -> bool:
    if kind == "cri":
        return _CRI.match(line) is not None
    if kind == "docker":
        return _DOCKER_HEAD.match(line) is not None
    if kind == "json":
        return _json_record(line) is not None
    return _STAMPED.match(line) is not None


def sniff(head: bytes) -> str | None:
    """The wrapper the first non-blank lines of ``head`` carry, or None.

    CRI is tried before the bare timestamp (a CRI line is also a timestamped line)."""
    lines = [ln for ln in head.split(b"\n")[: SNIFF_LINES * 4] if ln.strip()][:SNIFF_LINES]
    for kind in FORMATS:
        hits = sum(_is(kind, ln) for ln in lines)
        if kind == "stamped":
            # a bare timestamp must lead every line, tracebacks included, and of a few; and
            # be kubectl's (nanoseconds, trailing zeros trimmed): a framework's own logger
            # that leads with an ISO time prints milli- or microseconds
            if hits == len(lines) >= SNIFF_MIN and sum(
                    len(_STAMPED.match(ln).group(8) or b"") >= NANO_DIGITS for ln in lines
            ) >= SNIFF_SHARE * len(lines):
                return kind
        elif hits and hits >= SNIFF_SHARE * len(lines):
            # a runtime's own format is unmistakable even on one line, and admits a stray
            # piece (a progress bar's "\r" update the reader split off)
            return kind
    return None


_SECONDS: dict[bytes, float] = {}

# a block of whole records, matched in bulk (``Unwrapper._whole_block``): the time's whole
# seconds and its fraction, for each line
_TIME_PARTS = rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)"
_WHOLE = {
    "cri": re.compile(rb"^" + _TIME_PARTS + rb" (?:stdout|stderr) F ?", re.M),
    "stamped": re.compile(rb"^" + _TIME_PARTS + rb" ", re.M),
    "docker": re.compile(rb'^\{"log":"(.*)","stream":"(?:stdout|stderr)","time":"' + _TIME_PARTS
                         + rb'"\}$', re.M),
}


def _second(key: bytes) -> float:
    """Epoch seconds of ``YYYY-MM-DDTHH:MM:SS`` (cached: a second holds many lines)."""
    t = _SECONDS.get(key)
    if t is None:
        try:
            t = float(calendar.timegm((int(key[:4]), int(key[5:7]), int(key[8:10]),
                                       int(key[11:13]), int(key[14:16]), int(key[17:19]), 0, 0, 0)))
        except (ValueError, OverflowError):
            t = math.nan
        if len(_SECONDS) < 100_000:
            _SECONDS[key] = t
    return t


def stamp_seconds(m: re.Match[bytes], g: int) -> float:
    """Epoch seconds of the RFC 3339 time matched as group ``g`` (its fields follow).

    The wall clock it shows, with the offset left aside, as ``l4.timeparse`` reads every
    time (lines of one host stay on one clock)."""
    key = m.group(g)[:19]
    base = _SECONDS.get(key)
    if base is None:
        y, mo, d, h, mi, s = (int(x) for x in m.group(g + 1, g + 2, g + 3, g + 4, g + 5, g + 6))
        if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 62):
            return math.nan
        base = float(calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)))
        if len(_SECONDS) < 100_000:
            _SECONDS[key] = base
    frac = m.group(g + 7)
    return base + (int(frac) / 10 ** len(frac) if frac else 0.0)


_ESCAPE = re.compile(rb"\\(.)", re.S)
_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"", b"f": b""}


def _json_text(raw: bytes) -> bytes:
    """A JSON string's body (escapes and all) as the bytes it stands for."""
    if b"\\" not in raw:
        return raw
    try:
        return json.loads(b'"' + raw + b'"').encode("utf-8", "surrogateescape")
    except (ValueError, UnicodeError):
        # cut short or otherwise broken: the common escapes by hand
        return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), raw)


def _lines_of(block: bytes) -> list[bytes]:
    """A block's lines, without the empty one after its last newline."""
    lines = block.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def _emit(out: list[bytes], times: list[float], nos: list[int], text: bytes, t: float,
          no: int) -> None:
    """One record's text as lines (a carriage return ends a line, as the reader treats it)."""
    if b"\r" in text:
        text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if b"it/s" in text or b"s/it" in text:
        text = split_bar_glue(text)  # as l4.ingest.read_blocks does for a bare file
    for piece in text.split(b"\n"):
        out.append(piece)
        times.append(t)
        nos.append(no)


class Unwrapper:
    """Unwraps one file's blocks of whole lines (``l4.ingest.read_blocks``), in order.

    ``feed`` returns the program's lines as one block, each line's write time (nan where
    the wrapper gave none and no line before it did) and the 1-based number of the file
    line it starts on.  Pieces of one long line (CRI ``P``, a Docker ``log`` without its
    newline) are joined and numbered by their first piece."""

    def __init__(self, kind: str, select: str | None = None):
        if kind not in FORMATS:
            raise ValueError(f"unknown log wrapper {kind!r}")
        if select is not None and kind != "json":
            raise ValueError("only a collector's JSON export holds several nodes' records")
        self.kind = kind
        #: read only the records that name this node (a collector's export of several)
        self.select = select
        self._needle = json.dumps(select).encode() if select else b""
        #: consecutive records whose time went back (an export written newest first)
        self.back = 0
        self.forth = 0
        self.line_no = 0
        self.last = math.nan
        self.pending: list[bytes] = []
        self.pending_at = (0, math.nan)

    @staticmethod
    def _json_text_time(obj: dict) -> tuple[bytes, float, bool]:
        key = next(k for k in JSON_TEXT if isinstance(obj.get(k), str))
        t = next((_json_time(obj[k]) for k in JSON_TIME if k in obj), math.nan)
        text = obj[key].removesuffix("\n")
        extra = _fields(obj, key)
        if extra:
            text = f"{text} {extra}"
        return text.encode("utf-8", "surrogateescape"), t, True

    def _record(self, line: bytes) -> tuple[bytes, float, bool] | None:
        """(text, time, whole) of a wrapped line; None when it carries no wrapper."""
        if self.kind == "cri":
            m = _CRI.match(line)
            if m is None:
                return None
            return m.group(10), stamp_seconds(m, 1), m.group(9) == b"F"
        if self.kind == "docker":
            h = _DOCKER_HEAD.match(line)
            if h is None:
                return None
            m = _DOCKER.match(line)
            if m is None:  # cut short (a line longer than the reader keeps): what is there
                body = line[h.end():]
                cut = body.find(b'","')
                return _json_text(body[:cut] if cut >= 0 else body), math.nan, True
            text = _json_text(m.group(1))
            tm = _DOCKER_TIME.search(line, m.end())
            t = stamp_seconds(tm, 1) if tm else math.nan
            whole = text.endswith(b"\n")
            return (text[:-1] if whole else text), t, whole
        if self.kind == "json":
            obj = _json_record(line)
            return None if obj is None else self._json_text_time(obj)
        m = _STAMPED.match(line)
        if m is None:
            return None
        return m.group(9), stamp_seconds(m, 1), True

    def feed(self, block: bytes) -> tuple[bytes, np.ndarray, np.ndarray]:
        """The program's lines of one block of whole file lines (see the class)."""
        if self.select is not None:
            return self._feed_selected(block)
        if not self.pending:
            fast = self._whole_block(block)
            if fast is not None:
                return fast
        lines = _lines_of(block)
        out: list[bytes] = []
        times: list[float] = []
        nos: list[int] = []

        def emit(text: bytes, t: float, no: int) -> None:
            _emit(out, times, nos, text, t, no)

        for line in lines:
            self.line_no += 1
            rec = self._record(line)
            if rec is None:
                # no wrapper: a piece of the record before (a progress bar's "\r" update
                # the reader split off), written when it was
                emit(line, self.last, self.line_no)
                continue
            text, t, whole = rec
            if t == t:
                self.last = t
            t = self.last
            if self.pending:
                self.pending.append(text)
                if not whole:
                    continue
                no, t = self.pending_at
                text = b"".join(self.pending)
                self.pending = []
                emit(text, t, no)
            elif whole:
                emit(text, t, self.line_no)
            else:
                self.pending = [text]
                self.pending_at = (self.line_no, t)
        return self._block(out, times, nos)

    def _feed_selected(self, block: bytes) -> tuple[bytes, np.ndarray, np.ndarray]:
        """``feed`` for one node of an export: only its records (a line that does not hold
        the node's name is skipped without being parsed)."""
        lines = _lines_of(block)
        out: list[bytes] = []
        times: list[float] = []
        nos: list[int] = []
        base, needle = self.line_no, self._needle
        for k, line in enumerate(lines):
            if needle not in line:
                continue
            obj = _json_record(line)
            if obj is None or record_node(obj) != self.select:
                continue
            text, t, _ = self._json_text_time(obj)
            if t == t and self.last == self.last:
                if t < self.last:
                    self.back += 1
                elif t > self.last:
                    self.forth += 1
            if t == t:
                self.last = t
            _emit(out, times, nos, text, self.last, base + k + 1)
        self.line_no = base + len(lines)
        return self._block(out, times, nos)

    def _whole_block(self, block: bytes) -> tuple[bytes, np.ndarray, np.ndarray] | None:
        """``feed`` for the usual block, in bulk: every line one whole record, none with
        a carriage return or a progress bar glued to other output.  None for any other
        block (it is unwrapped line by line)."""
        n = block.count(b"\n") + (not block.endswith(b"\n"))
        if n == 0:
            return None
        rx = _WHOLE.get(self.kind)
        if rx is None:
            return None
        found = rx.findall(block)
        if len(found) != n:
            return None
        if self.kind == "docker":
            texts = []
            for body, *_ in found:
                if not body.endswith(b"\\n"):
                    return None  # a piece of a longer line
                text = _json_text(body[:-2])
                if b"\n" in text or b"\r" in text:
                    return None
                texts.append(text)
            inner = b"\n".join(texts) + b"\n"
            stamps = [(key, frac) for _, key, frac in found]
        else:
            inner = rx.sub(b"", block)
            if not inner.endswith(b"\n"):
                inner += b"\n"
            stamps = found
        if (b"it/s" in inner or b"s/it" in inner) and split_bar_glue(inner) != inner:
            return None
        times = np.fromiter((_second(key) for key, _ in stamps), np.float64, count=n)
        times += np.fromiter((float(f) if f else 0.0 for _, f in stamps), np.float64, count=n)
        self.last = float(times[-1])
        nos = np.arange(self.line_no + 1, self.line_no + n + 1, dtype=np.int64)
        self.line_no += n
        return inner, times, nos

    def finish(self) -> tuple[bytes, np.ndarray, np.ndarray]:
        """The piece of a line the file ended in the middle of, if any."""
        if not self.pending:
            return self._block([], [], [])
        no, t = self.pending_at
        text, self.pending = b"".join(self.pending), []
        out: list[bytes] = []
        times: list[float] = []
        nos: list[int] = []
        _emit(out, times, nos, text, t, no)
        return self._block(out, times, nos)

    @staticmethod
    def _block(out: list[bytes], times: list[float], nos: list[int]
               ) -> tuple[bytes, np.ndarray, np.ndarray]:
        if not out:
            return b"", np.zeros(0), np.zeros(0, np.int64)
        return (b"\n".join(out) + b"\n", np.asarray(times, dtype=np.float64),
                np.asarray(nos, dtype=np.int64))


def unwrap_lines(lines: list[str]) -> list[str]:
    """A file's lines, one for one, each as the program printed it (a piece of a longer
    line stays a piece): for tools that address lines by number, as a benchmark's truth
    does."""
    kind = sniff("\n".join(lines[: SNIFF_LINES * 4]).encode("utf-8", "surrogateescape"))
    if kind is None:
        return lines
    unwrapper = Unwrapper(kind)
    out = []
    for line in lines:
        rec = unwrapper._record(line.encode("utf-8", "surrogateescape"))
        out.append(line if rec is None else rec[0].decode("utf-8", "replace").split("\n")[0])
    return out


def unwrap_head(head: bytes) -> bytes:
    """``head`` (whole lines of a file's start) as the program printed it."""
    kind = sniff(head)
    if kind is None:
        return head
    return Unwrapper(kind).feed(head)[0]


#: how much of a file's head ``sniff_file`` reads
SNIFF_BYTES = 1 << 16
#: a wrapped file's longest physical line kept whole: runtimes split a program's line into
#: pieces of 16 KiB, and Docker's escapes can make a piece's record several times longer;
#: the program's lines are cut to l4.ingest.MAX_LINE once unwrapped, as a bare file's are
WRAPPED_MAX_LINE = 1 << 17


def sniff_file(path: Path) -> str | None:
    """``sniff`` on the head of the file at ``path`` (gzip or not); None if unreadable."""
    try:
        with raw_stream(path) as fh:
            head = fh.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return None
    return sniff(head.replace(b"\r\n", b"\n"))


def read_unwrapped(path: Path, stats: ReadStats, select: str | None = None
                   ) -> Iterator[tuple[bytes, np.ndarray | None, np.ndarray | None]]:
    """``(block, stamps, line numbers)`` for each block of the file at ``path``
    (``l4.ingest.read_blocks``): as they are, with None and None, unless the file is
    wrapped (``sniff_file``); then the program's lines, each line's write time and the
    1-based number of the file line it starts on.  ``select``: only the records of that
    node (a collector's export of several, ``split_exports``)."""
    kind = sniff_file(path)
    if kind is None:
        for block in read_blocks(path, stats):
            yield block, None, None
        return
    unwrapper = Unwrapper(kind, select if kind == "json" else None)
    for block in read_blocks(path, stats, max_line=WRAPPED_MAX_LINE, unglue=False):
        inner, stamps, nos = unwrapper.feed(block)
        if inner:
            yield cut_long_lines(inner, stats), stamps, nos
    inner, stamps, nos = unwrapper.finish()
    if inner:
        yield cut_long_lines(inner, stats), stamps, nos
    if unwrapper.back > max(2, unwrapper.forth):
        stats.notes.append(
            "its records run newest first (times go back); l4 reads a log oldest first, so "
            "the order of events is reversed: export it oldest first (e.g. logcli --forward)")


#: how much of an export's head and tail ``export_nodes`` reads for the nodes it holds
EXPORT_HEAD = 4 << 20
EXPORT_TAIL = 1 << 20


def export_nodes(path: Path) -> list[str]:
    """The nodes a collector's JSON export holds records of, when it holds two or more
    (read from its head and its tail); else []."""
    if path.name.endswith(".gz") or sniff_file(path) != "json":
        return []
    try:
        with open(path, "rb") as fh:
            head = fh.read(EXPORT_HEAD)
            size = fh.seek(0, 2)
            tail = b""
            if size > EXPORT_HEAD:
                fh.seek(max(EXPORT_HEAD, size - EXPORT_TAIL))
                tail = fh.read(EXPORT_TAIL)
    except OSError:
        return []
    lines = head.split(b"\n")
    if len(head) == EXPORT_HEAD:
        lines.pop()  # cut by the read
    if tail:
        lines += tail.split(b"\n")[1:]  # the first is the end of a line cut by the seek
    nodes = set()
    for line in lines:
        if line.strip():
            obj = _json_record(line)
            node = record_node(obj) if obj is not None else None
            if node:
                nodes.add(node)
    return sorted(nodes) if len(nodes) >= 2 else []


def split_exports(files: list) -> tuple[list, list[str]]:
    """``files`` (``l4.ingest.NodeFile``) with each collector's export of several nodes
    split into one entry per node (``record_node``), and a warning per export."""
    from dataclasses import replace

    taken = {f.node for f in files}
    out, notes = [], []
    for nf in files:
        nodes = export_nodes(Path(nf.path))
        if not nodes:
            out.append(nf)
            continue
        taken.discard(nf.node)
        for node in nodes:
            name = node if node not in taken else f"{node}@{nf.rel}"
            taken.add(name)
            out.append(replace(nf, node=name, record_node=node))
        notes.append(f"{nf.rel}: a collector's export of {len(nodes)} nodes' records; "
                     f"each node's are read as its own")
    return out, notes
