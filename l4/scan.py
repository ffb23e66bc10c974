"""The fast path: one pass over one node file, grouping lines by masked shape.

Training logs are extremely repetitive.  Instead of sending every line through regexes and
drain3, a block of lines is digit-collapsed with ``bytes.translate``, split, and grouped with
dict/numpy operations that run in C; the masking regexes run once per *distinct* collapsed
line.  The result, :class:`NodeScan`, is small (distinct shapes, counts, first/last
locations, one event id per record for the temporal analysis, and the iteration-marker
candidates) and is what gets cached, shipped between processes and merged.

``scan_node_file`` is a pure function of the file's bytes, so results can be cached by
(path, size, mtime) and computed in parallel, one file per core.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from l4 import gather
from l4.ingest import NodeFile, ReadStats
from l4.mask import DIGIT_TABLE, is_continuation, mask_line, number_spans, numbers_in
from l4.timeparse import parse_ts, ts_from_matrix, ts_layout
from l4.wrapped import read_unwrapped

#: occurrences kept per shape to decide whether it counts iterations
N_SAMPLES = 5
#: ... and at most this many while a counter repeats before it moves
MAX_SAMPLES = 48
#: at most this many iteration-marker candidates per file
MAX_MARKERS = 24
#: how many bytes of an event's last occurrence are kept (``ScanResult.last_examples``)
LAST_TEXT_BYTES = 640
# Per-process caches keyed by digit-collapsed line: the same keys recur on every node of a
# job (rank prefixes collapse too), so a worker masks each distinct key once per job.
_CACHE_MAX = 200_000
_MASKED: dict[bytes, str] = {}
_LAYOUTS: dict[bytes, tuple] = {}
#: a time of day anywhere near the start of a line: it has a clock, whatever the format
_CLOCK_RE = re.compile(r"\d\d:\d\d:\d\d")
_HEX_RUN = re.compile(rb"0x[0-9a-fA-F]+")
#: context lines (traceback frames) kept after an example line
MAX_CONTEXT = 30
BINARY_SHAPE = "<BINARY>"


def _empty(dtype: type) -> np.ndarray:
    return np.zeros(0, dtype)


@dataclass(eq=False)
class MarkerTrack:
    """Every occurrence of a shape whose numbers advance by a fixed step (a step counter).

    Numpy arrays, one entry per occurrence, so that a node with millions of iteration lines
    costs a few bytes per line (not Python objects) and a cached scan pickles compactly.
    The scanner appends blocks with :meth:`extend` and joins them once with :meth:`freeze`.
    """

    positions: np.ndarray = field(default_factory=lambda: _empty(np.int64))  # record index
    lines: np.ndarray = field(default_factory=lambda: _empty(np.int64))  # 1-based line numbers
    numbers: np.ndarray = field(default_factory=lambda: _empty(np.float64))  # counting field
    ts: np.ndarray = field(default_factory=lambda: _empty(np.float64))  # nan: no timestamp
    # the step's own duration in seconds, read from the line when it carries no clock
    # ("time=1565.7ms", "elapsed time per iteration (ms): 136.0"); nan otherwise
    durations: np.ndarray = field(default_factory=lambda: _empty(np.float64))
    # a progress bar's own clock where the line carries no time of day: the seconds since
    # the bar began that tqdm prints before its remaining time ("[53:45<1:48:36"); nan
    # otherwise.  Unlike the bar's speed, which tqdm smooths over many updates, it shows
    # the very step that turned slow (``l4.iterations.bar_clock``)
    elapsed: np.ndarray = field(default_factory=lambda: _empty(np.float64))
    field_step: tuple[int, float] | None = None  # which number counts, and by how much
    width: int = 0  # how many numbers each line carries
    duration_field: tuple[int, float] | None = None  # which number is a duration, its unit
    # > 0: the counting field counts up to this total and starts over ("Epoch 2: 130/200"),
    # so the steps are the periods added up (``l4.iterations``)
    period: float = 0.0
    # > 0: the constant number after the counting field in the samples ("130/200"), when
    # they showed no start-over yet (an epoch of 50 steps outlasts them): the counts are
    # the periods added up if they start over later (``l4.iterations._counted``)
    total: float = 0.0
    # the steps of the epochs before the first line's, when the counting field counts
    # within an epoch: "Epoch 2: 281/1359" of a job resumed mid-run is step 2 x 1359 + 281,
    # not 281 (``l4.iterations._counted``)
    base: float = 0.0
    bar: bool = False  # its lines are a progress bar's, with the bar's own clock (``elapsed``)
    _blocks: list = field(default_factory=list, repr=False)

    def extend(self, positions, lines, numbers, ts, durations=None, elapsed=None) -> None:
        """Queue one block of occurrences (joined by :meth:`freeze`)."""
        ts = np.asarray(ts, np.float64)
        dur = np.full(len(ts), np.nan) if durations is None else np.asarray(durations, np.float64)
        el = np.full(len(ts), np.nan) if elapsed is None else np.asarray(elapsed, np.float64)
        self._blocks.append((np.asarray(positions, np.int64), np.asarray(lines, np.int64),
                             np.asarray(numbers, np.float64), ts, dur, el))

    def freeze(self) -> MarkerTrack:
        """Join the queued blocks onto the arrays; idempotent."""
        if self._blocks:
            parts = [(self.positions, self.lines, self.numbers, self.ts, self.durations,
                      self.elapsed), *self._blocks]
            self.positions, self.lines, self.numbers, self.ts, self.durations, self.elapsed = (
                np.concatenate([p[k] for p in parts]) for k in range(6)
            )
            self._blocks = []
        return self


#: a number that measures time: after a timing word, or followed by a time unit
_DURATION_WORD = re.compile(r"(?:time|timing|elapsed|took|dt|duration|latency)[^0-9|,;]{0,24}$", re.I)
_DURATION_UNIT = re.compile(r"(?:\.\d+)?\s?(ms|s|sec|secs|seconds)\b")  # "1565.7ms": 1565 is free-standing


#: a number that measures speed, the step's duration upside down: after a rate word
#: ("CurrSamplesPerSec=150.9", "throughput: 312.5") or followed by a rate unit ("4.21it/s",
#: "5120 tokens/s")
_RATE_WORD = re.compile(r"(?:per_?sec(?:ond)?|/s(?:ec)?|throughput)[^0-9|,;]{0,4}$", re.I)
_RATE_UNIT = re.compile(r"(?:\.\d+)?\s?(?:it|its|samples?|tokens?|toks?|seqs?|sequences|imgs?|images)"
                        r"\s?/\s?s(?:ec)?\b", re.I)
_AVERAGED = re.compile(r"(?:avg|average|mean|running)[^0-9|,;]*$", re.I)

#: the unit of a rate field: its durations are 1/value, in no known unit (``to_duration``)
RATE = -1.0


def duration_field(text: str, counting: int) -> tuple[int, float] | None:
    """(index, seconds per unit) of the number in an iteration line that says how long the
    step took, or ``None``.  Training scripts print it on the progress line whatever their
    format; without a clock on the line it is the only measure of a slow step.

    Where the line states no duration but a speed (samples, tokens or iterations per
    second), the speed stands in: its inverse is proportional to the step's duration,
    which is all a slowdown needs, so the unit is ``RATE`` (durations in no known unit,
    never read as seconds).  A running average is the last resort: it hides the step that
    turned slow."""
    _, spans = number_spans(text)
    rates: list[tuple[bool, int]] = []
    for k, (a, b) in enumerate(spans):
        if k == counting:
            continue
        unit = _DURATION_UNIT.match(text, b)
        before = text[max(0, a - 40):a]
        if unit or _DURATION_WORD.search(before):
            ms = (unit and unit.group(1) == "ms") or "(ms)" in before or "ms" in before[-6:]
            return k, 0.001 if ms else 1.0
        if _RATE_UNIT.match(text, b) or _RATE_WORD.search(before):
            rates.append((bool(_AVERAGED.search(before[-24:])), k))
    return (min(rates)[1], RATE) if rates else None


#: a line whose time is a field it reports, not when it was printed: torchrun's failure
#: summary ("  time      : 2026-12-04_11:17:40", when the first worker failed, in whole
#: seconds) is printed last and would date the node's end before its own last lines
_STATED_TIME = re.compile(r"^\s*(?:\[\d+\]:\s*)?(?:time|timestamp|date)\s*[:=]\s", re.I)

#: the decimals of a number glued to its unit, where the text after the number begins
_FRACTION = re.compile(rb"\.(\d+)")
#: a progress bar's speed: iterations per second, or seconds per iteration once slower
#: than one a second (tqdm switches between "4.21it/s" and "1.37s/it" as it goes)
_ITS, _SIT = re.compile(rb"(?:\.\d+)?\s?its?/s"), re.compile(rb"(?:\.\d+)?\s?s/it")


def per_line(track: MarkerTrack, name: str, n: int, fill: float | int = math.nan) -> np.ndarray:
    """One of a track's per-line arrays (``durations``, ``elapsed``, ``lines`` ...), or
    ``n`` times ``fill`` where the track has none of that length: a scan cached before the
    field existed, or a track a caller built by hand."""
    v = getattr(track, name, None)
    if v is not None and len(v) == n:
        return v
    return np.full(n, fill)  # an int fill (line numbers) keeps an int array


#: a progress bar's elapsed time, the field before its remaining time: "[53:45<1:48:36",
#: "[1:02:41<?" (tqdm's format_interval: [H:]MM:SS)
_BAR_ELAPSED = re.compile(rb"\[(?:(\d{1,4}):)?(\d{1,2}):(\d{2})<")


def bar_elapsed(raw: bytes) -> float:
    """Seconds a progress bar has run, from one of its lines; nan without the field."""
    m = _BAR_ELAPSED.search(raw)
    if m is None:
        return math.nan
    h, mi, se = m.groups()
    return (int(h) if h else 0) * 3600.0 + int(mi) * 60.0 + int(se)


def _after(text: str, k: int) -> bytes:
    """The few characters after the ``k``-th number of ``text`` (its unit, if any)."""
    _, spans = number_spans(text)
    return text[spans[k][1]:spans[k][1] + 10].encode() if k < len(spans) else b""


def to_duration(value: float, unit: float, after: bytes = b"") -> float:
    """A duration field's reading as a duration: seconds for a time unit, the inverse of a
    speed for ``RATE`` (nan for a speed of zero).  ``after``: the text that follows the
    number on its line, which decides where the line says which (a bar's "it/s" is
    seconds per step upside down; its "s/it" is seconds).  A number glued to its unit
    ("3.40s/it", "4.21it/s") is read by ``number_spans`` up to its decimal point; the
    fraction is the start of ``after`` and is added back here."""
    if after:
        frac = _FRACTION.match(after)
        if frac and value == value and value == int(value):
            value = value + math.copysign(float(b"0." + frac.group(1)), value)
            after = after[frac.end():]
        if _ITS.match(after):
            return 1.0 / value if value > 0 else math.nan
        if _SIT.match(after):
            return value
    if unit == RATE:
        return 1.0 / value if value > 0 else math.nan
    return value * unit


@dataclass
class NodeScan:
    """Everything later stages need from one node file; small and picklable."""

    node: str
    rel: str
    size: int = 0
    mtime: float = 0.0
    status: str = "ok"  # ok | empty | partial | error
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    n_lines: int = 0
    n_records: int = 0
    shapes: list[str] = field(default_factory=list)
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    first_line: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    last_line: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    first_pos: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    last_pos: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    first_ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    last_ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    examples: dict[int, tuple[int, str, list[str]]] = field(default_factory=dict)
    last_examples: dict[int, str] = field(default_factory=dict)  # text of the last occurrence
    seq: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))
    markers: dict[int, MarkerTrack] = field(default_factory=dict)
    node_first_ts: float = math.nan
    node_last_ts: float = math.nan
    last_text: str = ""
    #: the lines are another node's share of this file (``l4.gather``), read after the
    #: node's own file; ``parts`` says where each file's records begin in the node's stream
    gathered: bool = False
    parts: list[tuple[str, int, int]] = field(default_factory=list)
    #: shapes a gatherer's file holds only on untagged lines: the gathering process's own
    launcher: list[int] = field(default_factory=list)


class _Lines:
    """Raw lines of a block by index, sliced on demand from newline offsets (splitting an
    8 MB block into a list of bytes objects costs more than everything else we do to it)."""

    __slots__ = ("block", "buf", "starts_np", "starts", "ends")

    def __init__(self, block: bytes, n: int):
        self.buf = np.frombuffer(block, dtype=np.uint8)
        nl = np.flatnonzero(self.buf == 10)
        ends = nl[:n] if len(nl) >= n else np.append(nl, len(block))
        self.block = block
        self.starts_np = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
        self.ends = ends.tolist()
        self.starts = self.starts_np.tolist()

    def columns(self, rows: np.ndarray, a: int, b: int) -> np.ndarray:
        """Bytes ``a:b`` of the given lines as an (n, b-a) uint8 matrix (same-layout lines)."""
        idx = self.starts_np[rows][:, None] + np.arange(a, b)[None, :]
        np.minimum(idx, len(self.buf) - 1, out=idx)
        return self.buf[idx]

    def __getitem__(self, i: int) -> bytes:
        return self.block[self.starts[i]: self.ends[i]]

    def __len__(self) -> int:
        return len(self.ends)


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _is_binary(text: str) -> bool:
    if "\x00" in text:
        return True
    if not text or text.isprintable():
        return False
    bad = sum(1 for ch in text if (ord(ch) < 32 and ch not in "\t\r") or ch == "\ufffd")
    return bad > 0.3 * len(text)


class _Scanner:
    """Mutable state of one file scan; only ``scan_node_file`` uses it."""

    def __init__(self, nf: NodeFile):
        self.nf = nf
        self.key_index: dict[bytes, int] = {}
        self.key_shape: list[int] = []  # key id -> shape id (-1 blank, -2 continuation, -3 binary)
        self.shape_index: dict[str, int] = {}
        self.shapes: list[str] = []
        self.counts: list[int] = []
        self.first_line: list[int] = []
        self.last_line: list[int] = []
        self.first_pos: list[int] = []
        self.last_pos: list[int] = []
        self.tagged: set[int] = set()  # shapes seen on an origin-tagged line (l4.gather)
        self.first_ts: list[float] = []
        self.last_ts: list[float] = []
        self.last_text_of: dict[int, str] = {}
        self.examples: dict[int, tuple[int, str, list[str]]] = {}
        self.samples: dict[int, list[tuple]] = {}  # shape -> [(pos, line, raw, numbers)]
        self.candidates: set[int] = set()
        self.rejected: set[int] = set()
        self.markers: dict[int, MarkerTrack] = {}
        self.seq_parts: list[np.ndarray] = []
        self.n_lines = 0
        self.n_records = 0
        self.binary_lines = 0
        self.bad_utf8_keys: set[int] = set()
        self.bad_utf8_lines = 0
        self.first_ts_node = math.nan
        self.last_ts_node = math.nan
        self.last_text = ""
        self.key_shape_arr = np.zeros(0, np.int64)
        self.keys: list[bytes] = []
        # a wrapped file's write times (l4.wrapped): those of the block being fed, and those
        # of the lines kept as counter samples (by record position)
        self.stamps: np.ndarray | None = None
        self.sample_stamps: dict[int, float] = {}

    # -- shapes -------------------------------------------------------------------------
    def _add_key(self, key: bytes) -> int:
        kid = len(self.key_shape)
        self.key_index[key] = kid
        self.keys.append(key)
        text = _decode(key)
        if "\ufffd" in text:
            self.bad_utf8_keys.add(kid)
        if not text.strip():
            sid = -1
        elif _is_binary(text):
            sid = -3
        elif is_continuation(text):
            sid = -2
        else:
            shape = _MASKED.get(key)
            if shape is None:
                shape = mask_line(text) or "<EMPTY>"
                if len(_MASKED) < _CACHE_MAX:
                    _MASKED[key] = shape
            sid = self.shape_index.get(shape, -4)
            if sid == -4:
                sid = len(self.shapes)
                self.shape_index[shape] = sid
                self.shapes.append(shape)
                self.counts.append(0)
                self.first_line.append(0)
                self.last_line.append(0)
                self.first_pos.append(0)
                self.last_pos.append(0)
                self.first_ts.append(math.nan)
                self.last_ts.append(math.nan)
        self.key_shape.append(sid)
        return kid

    # -- one block ------------------------------------------------------------------------
    def feed(self, block: bytes, line_nos: np.ndarray | None = None,
             untagged: np.ndarray | None = None, implied: np.ndarray | None = None,
             stamps: np.ndarray | None = None) -> None:
        """Scan one block of whole lines.  When the block is a selection of a gatherer's
        lines (``l4.gather``): ``line_nos`` each line's 1-based number in its file,
        ``untagged`` which of them carry no origin tag, ``implied`` the time of the last
        timed line of the file at or before each (nan: none yet), for lines that carry no
        time of their own.  ``stamps``: each line's write time as a container runtime
        recorded it (``l4.wrapped``; nan: none), which wins over a time in its text: one
        clock for every line of the file."""
        self.stamps = stamps
        try:
            self._feed(block, line_nos, untagged, implied)
        finally:
            self.stamps = None

    def _stamped(self, bl: int, ts: float) -> float:
        """``ts`` (read from line ``bl``'s text), or the line's write time where it has one."""
        if self.stamps is not None:
            st = float(self.stamps[bl])
            if st == st:
                return st
        return ts

    def _feed(self, block: bytes, line_nos: np.ndarray | None, untagged: np.ndarray | None,
              implied: np.ndarray | None) -> None:
        coll = block.translate(DIGIT_TABLE)
        if b"0x" in coll:
            # Hex literals (addresses, comm ids) differ on every line; mask_line turns them
            # into <HEX> whatever their digits, so collapsing them here changes no result.
            coll = _HEX_RUN.sub(b"0x0", coll)
        keys = coll.split(b"\n")
        if keys and keys[-1] == b"":
            keys.pop()
        n = len(keys)
        if n == 0:
            return
        index = self.key_index
        new = [k for k in dict.fromkeys(keys) if k not in index]
        for k in new:
            self._add_key(k)
        if new or len(self.key_shape_arr) != len(self.key_shape):
            self.key_shape_arr = np.asarray(self.key_shape, dtype=np.int64)
        kids = np.fromiter(map(index.__getitem__, keys), dtype=np.int64, count=n)
        sids = self.key_shape_arr[kids]
        raw_lines = _Lines(block, n)

        if self.bad_utf8_keys:
            bad = np.isin(kids, np.fromiter(self.bad_utf8_keys, np.int64))
            self.bad_utf8_lines += int(bad.sum())
        self.binary_lines += int((sids == -3).sum())

        rec_mask = sids >= 0
        if untagged is not None:
            self.tagged.update(np.unique(sids[rec_mask & ~untagged]).tolist())
        rec_sids = sids[rec_mask]
        rec_lines = np.nonzero(rec_mask)[0]  # block-relative line index of each record
        lno = (np.arange(self.n_lines + 1, self.n_lines + n + 1, dtype=np.int64)
               if line_nos is None else line_nos)  # each line's number in its file
        pos0 = self.n_records
        self.seq_parts.append(rec_sids.astype(np.uint32))
        if rec_sids.size:
            counts = np.bincount(rec_sids, minlength=len(self.shapes))
            present = np.nonzero(counts)[0]
            order = np.argsort(rec_sids, kind="stable")
            starts = np.concatenate(([0], np.cumsum(counts[present])[:-1]))
            for j, sid in enumerate(present.tolist()):
                c = int(counts[sid])
                seg_first = int(order[starts[j]])
                seg_last = int(order[starts[j] + c - 1])
                if self.counts[sid] == 0:
                    self.first_line[sid] = int(lno[rec_lines[seg_first]])
                    self.first_pos[sid] = pos0 + seg_first
                    bl = int(rec_lines[seg_first])
                    text = _decode(raw_lines[bl])
                    self.first_ts[sid] = self._stamped(bl, parse_ts(text))
                    if implied is not None and math.isnan(self.first_ts[sid]):
                        self.first_ts[sid] = float(implied[bl])
                    self.examples[sid] = (int(lno[bl]), text[:2000], _context(raw_lines, bl, sids))
                self.counts[sid] += c
                self.last_line[sid] = int(lno[rec_lines[seg_last]])
                self.last_pos[sid] = pos0 + seg_last
                last_text = _decode(raw_lines[int(rec_lines[seg_last])][:LAST_TEXT_BYTES])
                self.last_text_of[sid] = last_text
                ts_last = self._stamped(int(rec_lines[seg_last]), parse_ts(last_text[:200]))
                if implied is not None and math.isnan(ts_last):
                    ts_last = float(implied[int(rec_lines[seg_last])])
                if not math.isnan(ts_last):
                    self.last_ts[sid] = ts_last
                if sid in self.rejected:
                    continue
                self._track(
                    sid, order[starts[j] : starts[j] + c], rec_lines, raw_lines, lno, pos0, kids
                )
        # node-level first/last timestamps (first lines and last lines only: cheap)
        if math.isnan(self.first_ts_node):
            for raw in (raw_lines[i] for i in range(min(50, n))):
                ts = parse_ts(_decode(raw))
                if not math.isnan(ts):
                    self.first_ts_node = ts
                    break
        tail = [raw_lines[i] for i in range(max(0, n - 200), n)]
        for raw in reversed(tail):
            text = _decode(raw)
            if text.strip():
                self.last_text = text[:2000]
                break
        for raw in reversed(tail):
            text = _decode(raw)
            if _STATED_TIME.match(text):
                continue
            ts = parse_ts(text)
            if not math.isnan(ts):
                self.last_ts_node = ts
                break
        if self.stamps is not None and n:
            timed = self.stamps[~np.isnan(self.stamps)]
            if timed.size and math.isnan(self.first_ts_node):
                self.first_ts_node = float(timed[0])
            if timed.size:
                self.last_ts_node = float(timed[-1])
        if implied is not None and n:
            timed = implied[~np.isnan(implied)]
            if timed.size and math.isnan(self.first_ts_node):
                self.first_ts_node = float(timed[0])
            if timed.size and not (timed[-1] <= self.last_ts_node):
                self.last_ts_node = float(timed[-1])
        self.n_lines += n
        self.n_records += int(rec_sids.size)

    def _track(self, sid, seg, rec_lines, raw_lines, lno, pos0, kids) -> None:
        """Keep samples of a shape; once they show a step counter, record all its lines."""
        if sid in self.candidates:
            self._extend_track(self.markers[sid], seg, rec_lines, raw_lines, lno, pos0, kids)
            return
        if "<*>" not in self.shapes[sid]:
            self.rejected.add(sid)  # no number, cannot count iterations
            return
        samples = self.samples.setdefault(sid, [])
        taken = 0
        for r in seg.tolist():
            if len(samples) >= MAX_SAMPLES:
                break
            bl = int(rec_lines[r])
            raw = raw_lines[bl]
            samples.append((pos0 + r, int(lno[bl]), raw, self._numbers(int(kids[bl]), raw)))
            if self.stamps is not None:
                self.sample_stamps[pos0 + r] = float(self.stamps[bl])
            taken += 1
        if len(samples) < N_SAMPLES:
            return
        rows = [nums for _, _, _, nums in samples]
        fs = step_field(rows)
        if fs is None:
            mine = _one_bar(rows)
            if mine is not None:
                # two bars of one look (training's "k/17500", evaluation's "k/20"): the
                # samples of the one most lines draw are the counter, the rest are dropped
                samples[:] = [samples[i] for i in mine]
                rows = [rows[i] for i in mine]
                fs = step_field(rows)
        if fs is None and len(samples) < MAX_SAMPLES and _may_still_count(rows):
            return  # e.g. every rank prints the same step: wait for the counter to move
        if fs is None or len(self.candidates) >= MAX_MARKERS:
            self.rejected.add(sid)
            self.samples.pop(sid, None)
            return
        self._promote(sid, fs, rows)
        rest = seg[taken:]
        if rest.size:
            self._track(sid, rest, rec_lines, raw_lines, lno, pos0, kids)

    def _promote(self, sid: int, fs: tuple[int, float], rows: list[list[float]]) -> None:
        """Make shape ``sid`` an iteration-marker track from its samples."""
        self.candidates.add(sid)
        track = MarkerTrack(field_step=fs, width=min(len(r) for r in rows))
        j = fs[0]
        if j + 1 < track.width:
            nxt = [r[j + 1] for r in rows]
            per = _periods([r[j] for r in rows], nxt)
            track.period = per[1] if per else 0.0
            if (not per and len(set(nxt)) == 1 and nxt[0] >= 3
                    and all(r[j] <= nxt[0] for r in rows)):
                track.total = nxt[0]
        samples = self.samples.pop(sid)
        if track.period > 0 or track.total > 0:
            track.base = (track.period or track.total) * epochs_before(_decode(samples[0][2]), j)
        ts = [self.sample_stamps.get(s[0], math.nan) for s in samples]
        ts = [t if t == t else parse_ts(_decode(s[2])) for t, s in zip(ts, samples, strict=True)]
        elapsed = None
        if all(math.isnan(t) for t in ts):
            track.duration_field = duration_field(_decode(samples[0][2]), fs[0])
            elapsed = [bar_elapsed(bytes(s[2])) for s in samples]
            track.bar = not all(math.isnan(e) for e in elapsed)
        durations = None
        if track.duration_field is not None:
            k, unit = track.duration_field
            durations = [to_duration(s[3][k], unit, _after(_decode(s[2]), k)) if k < len(s[3])
                         else math.nan for s in samples]
        track.extend([s[0] for s in samples], [s[1] for s in samples],
                     [s[3][fs[0]] for s in samples], ts, durations, elapsed)
        self.markers[sid] = track

    def _finish_samples(self) -> None:
        """A job that died at iteration 5 printed four iteration lines: fewer than the
        samples a counter normally has to show, but still a counter, and the one that says
        where the job stopped."""
        for sid in sorted(self.samples):
            rows = [nums for _, _, _, nums in self.samples[sid]]
            if len(self.candidates) >= MAX_MARKERS:
                break
            fs = step_field(rows)
            if fs is not None:
                self._promote(sid, fs, rows)

    def _layout(self, kid: int) -> tuple:
        key = self.keys[kid]
        lay = _LAYOUTS.get(key)
        if lay is None:
            text = key.decode("latin-1")
            _, spans = number_spans(text)
            # no ISO layout but a clock (UTC offset, syslog, dmesg): parse those lines singly
            clock = _CLOCK_RE.search(text, 0, 200) is not None
            lay = (ts_layout(text) or ("parse" if clock else None), spans)
            if len(_LAYOUTS) < _CACHE_MAX:
                _LAYOUTS[key] = lay
        return lay

    def _numbers(self, kid: int, raw: bytes) -> list[float]:
        """Numbers of one raw line, sliced at its key's offsets (no regex per line)."""
        if b"0x0" in self.keys[kid]:
            return numbers_in(_decode(raw))
        return [_to_float(raw[a:b]) for a, b in self._layout(kid)[1]]

    def _extend_track(self, track, seg, rec_lines, raw_lines, lno, pos0, kids) -> None:
        """Append a block's occurrences of a marker shape, without a regex per line.

        All lines of one digit-collapsed key have the same byte layout, so the timestamp and
        the counting field are sliced at the key's offsets and converted by numpy in bulk.
        Only the counting field is kept: it names the iteration; the rest can be re-read
        from the file at the recorded line if ever needed.
        """
        bls = rec_lines[seg]
        line_kids = kids[bls]
        n = len(bls)
        ts = np.full(n, np.nan)
        vals = np.full(n, np.nan)
        durs = np.full(n, np.nan) if track.duration_field is not None else None
        els = np.full(n, np.nan) if getattr(track, "bar", False) else None
        j = track.field_step[0] if track.field_step else 0
        other = np.zeros(n, dtype=bool)
        for kid in np.unique(line_kids).tolist():
            sel = np.nonzero(line_kids == kid)[0]
            if track.total > 0 and b"0x0" not in self.keys[kid]:
                spans = self._layout(kid)[1]
                if j + 1 < len(spans):
                    a, b = spans[j + 1]
                    if _to_float(raw_lines[int(bls[sel[0]])][a:b]) != track.total:
                        # another bar of the same look ("0/20 [00:00<00:09" of an evaluation
                        # among "31580/32440" of training): its counts are not these steps
                        other[sel] = True
                        continue
            if b"0x0" in self.keys[kid]:
                # hex runs were shortened in the key: offsets differ line to line
                texts = [_decode(raw_lines[r]) for r in bls[sel].tolist()]
                ts[sel] = [parse_ts(t) for t in texts]
                vals[sel] = [(numbers_in(t)[j:j + 1] or [np.nan])[0] for t in texts]
                continue
            ts_lay, spans = self._layout(kid)
            rows = bls[sel]
            if durs is not None and ts_lay is None and track.duration_field[0] < len(spans):
                # no clock on these lines: the step's own duration is the only measure
                (a, b), unit = spans[track.duration_field[0]], track.duration_field[1]
                durs[sel] = [to_duration(_to_float(raw_lines[r][a:b]), unit, raw_lines[r][b:b + 10])
                             for r in rows.tolist()]
            if els is not None:
                els[sel] = [bar_elapsed(raw_lines[r]) for r in rows.tolist()]
            if ts_lay == "parse":
                ts[sel] = [parse_ts(_decode(raw_lines[r][:200])) for r in rows.tolist()]
            elif ts_lay is not None:
                a0, b0, groups = ts_lay
                ts[sel] = ts_from_matrix(raw_lines.columns(rows, a0, b0), groups)
            if j < len(spans):
                a, b = spans[j]
                digits = raw_lines.columns(rows, a, b).astype(np.int64) - 48
                if ((digits >= 0) & (digits <= 9)).all():
                    vals[sel] = digits @ (10 ** np.arange(b - a - 1, -1, -1, dtype=np.int64))
                else:  # a sign or a decimal point: parse the text
                    vals[sel] = [_to_float(raw_lines[r][a:b]) for r in rows.tolist()]
        if self.stamps is not None:
            st = self.stamps[bls]
            ts = np.where(np.isnan(st), ts, st)
        if other.any():
            keep = ~other
            seg, bls, vals, ts = seg[keep], bls[keep], vals[keep], ts[keep]
            durs = durs[keep] if durs is not None else None
            els = els[keep] if els is not None else None
        track.extend(pos0 + seg, lno[bls], vals, ts, durs, els)

    def result(self, stats: ReadStats, size: int, mtime: float) -> NodeScan:
        scan = NodeScan(node=self.nf.node, rel=self.nf.rel, size=size, mtime=mtime)
        scan.n_lines = self.n_lines
        scan.n_records = self.n_records
        scan.shapes = self.shapes
        scan.counts = np.asarray(self.counts, dtype=np.int64)
        scan.first_line = np.asarray(self.first_line, dtype=np.int64)
        scan.last_line = np.asarray(self.last_line, dtype=np.int64)
        scan.first_pos = np.asarray(self.first_pos, dtype=np.int64)
        scan.last_pos = np.asarray(self.last_pos, dtype=np.int64)
        scan.first_ts = np.asarray(self.first_ts, dtype=np.float64)
        scan.last_ts = np.asarray(self.last_ts, dtype=np.float64)
        scan.examples = self.examples
        scan.last_examples = self.last_text_of
        scan.seq = (
            np.concatenate(self.seq_parts) if self.seq_parts else np.zeros(0, np.uint32)
        )
        self._finish_samples()
        scan.markers = {sid: track.freeze() for sid, track in self.markers.items()}
        scan.node_first_ts = self.first_ts_node
        scan.node_last_ts = self.last_ts_node
        scan.last_text = self.last_text
        if stats.error:
            scan.status = "partial" if self.n_lines else "error"
            scan.error = stats.error
            scan.warnings.append(f"{self.nf.rel}: {stats.error}; kept {self.n_lines} lines read before")
        elif self.n_records == 0:
            scan.status = "empty"
            scan.warnings.append(f"{self.nf.rel}: no log records (empty or blank file)")
        if self.bad_utf8_lines:
            scan.warnings.append(
                f"{self.nf.rel}: {self.bad_utf8_lines} lines are not valid UTF-8 "
                "(decoded with replacement characters)"
            )
        if self.binary_lines:
            scan.warnings.append(f"{self.nf.rel}: {self.binary_lines} lines of binary data skipped")
        scan.warnings.extend(f"{self.nf.rel}: {note}" for note in stats.notes)
        if stats.long_lines:
            scan.warnings.append(
                f"{self.nf.rel}: {stats.long_lines} lines longer than 4096 bytes were cut"
            )
        return scan


def _to_float(v: bytes) -> float:
    """A number field's value; nan for what is no finite number (a hex id's "7e494"
    reads as 7 x 10^494: infinity)."""
    try:
        x = float(v)
    except ValueError:
        return math.nan
    return x if math.isfinite(x) else math.nan


def _context(raw_lines: _Lines, bl: int, sids: np.ndarray) -> list[str]:
    """Continuation lines around an example line in its block: the traceback frames above
    an exception line, or below a ``Traceback`` header (where the code path shows)."""
    before: list[str] = []
    j = bl - 1
    while j >= 0 and sids[j] == -2 and len(before) < MAX_CONTEXT:
        before.append(_decode(raw_lines[j])[:500])
        j -= 1
    after: list[str] = []
    j = bl + 1
    while j < len(sids) and sids[j] == -2 and len(after) < MAX_CONTEXT:
        after.append(_decode(raw_lines[j])[:500])
        j += 1
    return before[::-1] + after


def step_field(rows: list[list[float]]) -> tuple[int, float] | None:
    """(field index, step) of the first integer field that advances by a fixed step.

    Repeats are allowed (several ranks print the same counter, a progress bar redraws the
    same step): runs of equal values collapse before the step is checked.
    """
    if len(rows) < 3:
        return None
    width = min(len(r) for r in rows)
    best: tuple[int, float] | None = None
    # (distinct values, even, -step, largest value): the most steps, then one that
    # advances evenly (a bar's count by 50 at every line, not its percentage by 1 or 2),
    # then the finest, then the one that counted furthest: a bar's count of this epoch and
    # the job's global step advance alike ("95/925, ..., step=94, global_step=1019"), but
    # only the global one goes on where the epoch starts over, as the job's iteration
    best_key: tuple = (0, False, -math.inf, -math.inf)
    for j in range(width):
        vals = [r[j] for r in rows]
        if any(v != v or v != int(v) for v in vals):
            continue
        if j + 2 < width and _percentage_of(vals, [r[j + 1] for r in rows], [r[j + 2] for r in rows]):
            # a bar's percentage ("38%| ... | 1900/4944") is its count over its total: on a
            # long bar it creeps up by one at every redraw, as evenly as a counter would
            continue
        periods = _periods(vals, [r[j + 1] for r in rows] if j + 1 < width else None)
        if periods is not None:
            # a progress fraction that completes and starts over ("Epoch 2: 130/200"):
            # each period is a counter of its own, and together they count the steps
            d = periods[0]
            distinct = sum(1 for i, v in enumerate(vals) if i == 0 or v != vals[i - 1])
            if (distinct, True, -d, max(vals)) > best_key:
                best, best_key = (j, d), (distinct, True, -d, max(vals))
            continue
        # ranks of one node print the same step in any order ("iter 6" of one rank before
        # "iter 5" of another): the counter is the envelope, and steps back stay small
        top, envelope, back = -math.inf, [], 0.0
        for v in vals:
            back = max(back, top - v)
            top = max(top, v)
            envelope.append(top)
        distinct = [v for i, v in enumerate(envelope) if i == 0 or v != envelope[i - 1]]
        if len(distinct) < 3:
            continue
        diffs = [distinct[i + 1] - distinct[i] for i in range(len(distinct) - 1)]
        d = _fixed_step(diffs)
        if d is None and j + 1 < width and _fraction_of(vals, [r[j + 1] for r in rows]):
            # the count of a fraction ("3640/3980"): a progress bar is redrawn when time
            # allows, not at every step, so its counts advance unevenly; still one step
            d = min(diffs)
            d = d if d > 0 and not any(x % d for x in diffs) else None
        # steps back only where each step is printed several times (by several ranks): a
        # rank number every rank prints once, in any order, is no counter
        jitter_ok = back == 0 or (d is not None and back <= 2 * d
                                  and len(vals) >= 1.5 * len(set(vals)))
        if d is not None and jitter_ok:
            # the finest counter wins: a progress bar's percentage also creeps up by one,
            # and on a bar of 50 steps it moves by 2 at every step its count moves by 1
            key = (len(distinct), len(set(diffs)) == 1, -d, distinct[-1])
            if d > 0 and key > best_key:
                best, best_key = (j, d), key
    return best


def _percentage_of(vals: list[float], count: list[float], total: list[float]) -> bool:
    """Is this field the percentage of the fraction after it (the count of ``count`` over
    the constant ``total``, rounded either way)?"""
    if not _fraction_of(count, total) or total[0] <= 0:
        return False
    return all(abs(v - 100.0 * c / total[0]) <= 1.0 for v, c in zip(vals, count, strict=True))


def _fraction_of(vals: list[float], nxt: list[float]) -> bool:
    """Is this field the count of a fraction: followed by one constant total it never
    passes ("130/200")?"""
    return len(set(nxt)) == 1 and nxt[0] == nxt[0] and nxt[0] >= 3 and max(vals) <= nxt[0]


def _fixed_step(diffs: list[float]) -> float | None:
    """The fixed step of a counter's advances, or ``None`` when it has none.

    Every advance is one step, or a few where another line shape drew the counts between
    (a progress bar's elapsed time turns from "59:58" to "1:00:03" now and then while it
    crosses the hour, and each form is a shape of its own); most advances are one step.
    """
    step = _grid_step(diffs)
    if step is None and len(diffs) >= 3 and 0 < diffs[0] < 3 * max(diffs[1:]):
        # the first line is off the grid: many loops log their first step and then every
        # N-th ("batch=1", "batch=100", "batch=200" ...); the rest says the step
        step = _grid_step(diffs[1:])
    return step


def _grid_step(diffs: list[float]) -> float | None:
    """The step of advances that are one step each, mostly (see :func:`_fixed_step`)."""
    if not diffs:
        return None
    step = min(diffs)
    if step <= 0 or any(d > 3 * step or d % step for d in diffs):
        return None
    if len(diffs) > 1 and sum(d == step for d in diffs) < 0.8 * len(diffs):
        return None
    return step


#: the number of an epoch: the word, then the number ("Epoch 2:", "epoch=3", "[Epoch 1]")
_EPOCH_WORD = re.compile(r"\bepoch\s*[:=#]?\s*$", re.I)
_OF_TOTAL = re.compile(r"\s*/\s*\d")


def epochs_before(line: str, j: int) -> int:
    """How many whole epochs came before this line, whose ``j``-th number counts steps
    within an epoch: the number an "epoch" word names before that field, counted from 0
    as Lightning and tqdm descriptions do, or from 1 when it is a fraction of the epochs
    ("Epoch 3/10", as Keras prints).  0 when no epoch is named."""
    _, spans = number_spans(line)
    for a, b in reversed(spans[:j]):
        if _EPOCH_WORD.search(line, max(0, a - 12), a):
            try:
                v = int(line[a:b])
            except ValueError:
                return 0
            one_based = _OF_TOTAL.match(line, b) is not None
            return max(0, v - 1 if one_based else v)
    return 0


def unwrap_counts(vals: list[float], period: float) -> list[float]:
    """Counts of a fraction that starts over every ``period`` steps, as steps: each count
    is read as the step nearest to the furthest step seen so far (the count plus a whole
    number of periods).  A bar that starts over moves on by a period; ranks of one node
    drawing their own bars, a step or two apart and in any order, even across an epoch's
    end, keep their own steps."""
    out: list[float] = []
    top = -math.inf
    for v in vals:
        if v != v:  # nan
            out.append(v)
            continue
        g = v if top == -math.inf else v + period * max(0, round((top - v) / period))
        out.append(g)
        top = max(top, g)
    return out


def _periods(vals: list[float], nxt: list[float] | None) -> tuple[float, float] | None:
    """(step, total) of a field that counts up to the constant field after it
    ("130/200"), starts over and counts up again; None for anything else.  The constant
    total is the period, and the counts read as steps (:func:`unwrap_counts`) must
    advance like a plain counter's, small steps back only where counts repeat (ranks of
    one node drawing the same count).  The total is what tells an epoch's progress from a
    rank number that every rank prints in turn."""
    if nxt is None or len(set(nxt)) != 1 or nxt[0] != nxt[0] or nxt[0] < 3:
        return None
    total = nxt[0]
    if max(vals) > total:
        return None  # a count past its "total" ("socket.cc:750 -> 6": a line, a code)
    if not any(vals[i - 1] - vals[i] > total / 2 for i in range(1, len(vals))):
        return None  # never started over
    steps = unwrap_counts(vals, total)
    top, env, back = -math.inf, [], 0.0
    for v in steps:
        back = max(back, top - v)
        top = max(top, v)
        env.append(top)
    # a count or two may be missing where another line shape drew them (a bar line that
    # the launcher glued to a log line): the steps are the counter's step, mostly
    diffs = [y - x for x, y in zip(env, env[1:], strict=False) if y != x]
    step = _fixed_step(diffs)
    if step is None and diffs:
        # a bar is redrawn when time allows, and at an epoch's end and start: "4700/4728",
        # "4728/4728", then "1/4728", "72/4728", "172/4728" (as for a bar that does not
        # start over, below in ``step_field``); still one step
        d = min(diffs)
        step = d if d > 0 and not any(x % d for x in diffs) else None
    if step is None:
        return None
    if back and not (back <= 2 * step and len(vals) >= 1.5 * len(set(vals))):
        return None
    return step, total


def _one_bar(rows: list[list[float]]) -> list[int] | None:
    """Indices of the rows of the bar most rows draw, when rows of one shape draw several
    fractions ("130/17500" and "7/20"): a field followed by a total that most rows share
    (three in five) and the rest do not.  ``None`` when no such total splits them."""
    width = min(len(r) for r in rows)
    for j in range(width - 1):
        totals = [r[j + 1] for r in rows]
        top = max(set(totals), key=totals.count)
        mine = [i for i, r in enumerate(rows) if r[j + 1] == top and 0 <= r[j] <= top]
        if top >= 3 and 5 * len(mine) >= 3 * len(rows) and len(mine) < len(rows) \
                and len(mine) >= N_SAMPLES:
            return mine
    return None


def _may_still_count(rows: list[list[float]]) -> bool:
    """Some integer field is non-decreasing but has not moved enough yet: sample more."""
    width = min(len(r) for r in rows)
    for j in range(width):
        vals = [r[j] for r in rows]
        if any(v != v or v != int(v) for v in vals):
            continue
        if j + 2 < width and _percentage_of(vals, [r[j + 1] for r in rows], [r[j + 2] for r in rows]):
            # a bar's percentage ("38%| ... | 1900/4944") is its count over its total: on a
            # long bar it creeps up by one at every redraw, as evenly as a counter would
            continue
        if all(b >= a for a, b in zip(vals, vals[1:], strict=False)):
            if len(set(vals)) < 3:
                return True
    return False


def scan_node_file(nf: NodeFile) -> NodeScan:
    """Scan one node file (see module docstring).  Never raises for bad content."""
    try:
        st = os.stat(nf.path)
        size, mtime = st.st_size, st.st_mtime
    except OSError as exc:
        scan = NodeScan(node=nf.node, rel=nf.rel, status="error", error=f"cannot stat: {exc}")
        scan.warnings.append(f"{nf.rel}: cannot read ({exc})")
        return scan
    scanner = _Scanner(nf)
    stats = ReadStats()
    if not (nf.origin or nf.routed):
        for block, stamps, line_nos in read_unwrapped(Path(nf.path), stats,
                                                      select=nf.record_node or None):
            scanner.feed(block, line_nos, None, None, stamps)
        return scanner.result(stats, size, mtime)
    # one node's share of a file that gathers several nodes' output (l4.gather)
    names = gather.node_names([nf.node, nf.origin, *nf.routed])
    tags = gather.tag_pattern([nf.origin] if nf.origin else list(nf.routed))
    seen = 0  # lines of the file before this block
    clock = math.nan  # the file's last timed line so far: its lines are in time order
    for block, stamps, line_nos in read_unwrapped(Path(nf.path), stats):
        lines = gather.line_index(block)
        keep, untagged = gather.select(block, nf, tags, names, lines)
        implied, clock = gather.implied_times(block, keep, clock, lines)
        if len(keep):
            nos = keep + seen + 1 if line_nos is None else line_nos[keep]
            scanner.feed(gather.sub_block(block, keep, lines), nos, untagged, implied,
                         None if stamps is None else stamps[keep])
        seen += lines[2]
    scan = scanner.result(stats, size, mtime)
    if nf.routed:
        # shapes the gathering process printed itself, never a rank (see l4.gather.select)
        scan.launcher = sorted(set(range(len(scan.shapes))) - scanner.tagged)
    if nf.origin:
        scan.gathered = True
        scan.warnings = [w for w in scan.warnings if "no log records" not in w]
    return scan
