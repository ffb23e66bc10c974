"""Merge per-node scans into one job-wide event matrix over the shared template store.

Each node's distinct masked shapes go through drain3 once (in a deterministic order), so the
same event id names the same template on every node and in every job.  The result is plain
arrays indexed ``[node, event]`` that the analysis stages read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from l4.ingest import JobSpec
from l4.scan import MarkerTrack, NodeScan, per_line
from l4.templates import TemplateStore
from l4.timeparse import YEARLESS_MAX, place_yearless


@dataclass
class ParsedJob:
    """A job as analysis sees it: nodes x events, per-node sequences and iteration markers."""

    job_id: str
    config_id: str | None
    framework: str | None
    root: str
    nodes: list[str]
    files: list[str]
    event_ids: list[int]  # drain3 cluster id of each event column
    templates: list[str]
    counts: np.ndarray  # (nodes, events) int64
    first_line: np.ndarray  # (nodes, events) 1-based, 0 when absent
    last_line: np.ndarray
    first_pos: np.ndarray  # record index of first occurrence, -1 when absent
    first_ts: np.ndarray  # epoch seconds, nan when absent or unknown
    last_ts: np.ndarray
    seqs: list[np.ndarray]  # per node: event column of every record, in order
    markers: list[dict[int, MarkerTrack]]  # per node: event column -> marker track
    examples: list[dict[int, tuple[int, str, list[str]]]]  # per node: column -> (line, text, ctx)
    last_examples: list[dict[int, str]]  # per node: column -> text of the last occurrence
    n_lines: np.ndarray
    n_records: np.ndarray
    node_first_ts: np.ndarray
    node_last_ts: np.ndarray
    last_text: list[str]
    status: list[str]
    warnings: list[str] = field(default_factory=list)
    file_info: list[dict] = field(default_factory=list)
    #: (nodes, events) record index of the last occurrence, -1 when absent
    last_pos: np.ndarray | None = None
    #: per node: (file, first record, line offset) of each file its stream reads, when
    #: more than one (its own file, then its share of a gatherer's: ``l4.gather``); the
    #: stream's line numbers run on across them, a file's own is the stream's less its offset
    parts: list[list[tuple[str, int, int]]] = field(default_factory=list)
    #: (nodes, events) bool: lines a gatherer's launcher printed itself (``l4.gather``)
    launcher: np.ndarray | None = None

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def n_events(self) -> int:
        return len(self.event_ids)

    def locate(self, i: int, pos: int, line: int) -> tuple[str, int]:
        """(file, line in that file) of record ``pos`` at stream line ``line`` of node ``i``."""
        name, off = self.files[i], 0
        for rel, start, offset in (self.parts[i] if i < len(self.parts) else ()):
            if pos >= start:
                name, off = rel, offset
        return name, line - off

    def column(self, event_id: int) -> int | None:
        try:
            return self.event_ids.index(event_id)
        except ValueError:
            return None


def merge_scans(spec: JobSpec, scans: list[NodeScan], store: TemplateStore, *,
                release: bool = True) -> ParsedJob:
    """Feed every scan's shapes to ``store`` and build the job's event matrix.

    ``release`` drops each scan's per-line sequence once it has been remapped, so a job's
    memory holds one 4-byte event id per line, not two copies.
    """
    # each file as read, before a node's files are joined: the report lists every file
    own_files = {(s.rel, s.node): s for s in scans if not s.gathered}
    scans = sorted(join_gathered(join_parts(scans)), key=lambda s: s.rel)
    col_of: dict[int, int] = {}
    local_cols: list[np.ndarray] = []
    for scan in scans:
        cols = np.empty(len(scan.shapes), dtype=np.int64)
        for i, shape in enumerate(scan.shapes):
            cid = store.add(shape)
            cols[i] = col_of.setdefault(cid, len(col_of))
        local_cols.append(cols)
    event_ids = list(col_of)
    n, m = len(scans), len(event_ids)
    counts = np.zeros((n, m), np.int64)
    first_line = np.zeros((n, m), np.int64)
    last_line = np.zeros((n, m), np.int64)
    first_pos = np.full((n, m), -1, np.int64)
    last_pos = np.full((n, m), -1, np.int64)
    first_ts = np.full((n, m), math.nan)
    last_ts = np.full((n, m), math.nan)
    seqs, markers, examples, last_examples = [], [], [], []
    launcher = np.zeros((n, m), bool)
    for r, (scan, cols) in enumerate(zip(scans, local_cols, strict=True)):
        if len(cols):
            np.add.at(counts[r], cols, scan.counts)
            # several shapes may share an event: keep the earliest first / latest last line
            for i, c in enumerate(cols.tolist()):
                fp = int(scan.first_pos[i])  # a position orders lines of several files
                if first_pos[r, c] < 0 or fp < first_pos[r, c]:
                    first_line[r, c] = int(scan.first_line[i])
                    first_pos[r, c] = fp
                    first_ts[r, c] = scan.first_ts[i]
                lp = int(scan.last_pos[i]) if i < len(scan.last_pos) else int(scan.last_line[i])
                if lp >= last_pos[r, c]:
                    last_pos[r, c] = lp
                    last_line[r, c] = int(scan.last_line[i])
                lt = scan.last_ts[i] if i < len(scan.last_ts) else math.nan
                if not math.isnan(lt) and not (lt <= last_ts[r, c]):
                    last_ts[r, c] = lt
        if scan.launcher:
            own = np.ones(m, bool)  # an event is the launcher's when no tagged shape has it
            mine = np.zeros(m, bool)
            theirs = set(scan.launcher)
            for i, c in enumerate(cols.tolist()):
                mine[c] = True
                if i not in theirs:
                    own[c] = False
            launcher[r] = own & mine
        # event column per record, 4 bytes a line: the largest thing a diagnosis keeps
        seqs.append(cols.astype(np.uint32)[scan.seq] if scan.seq.size else np.zeros(0, np.uint32))
        if release:
            scan.seq = np.zeros(0, np.uint32)
        ex: dict[int, tuple[int, str, list[str]]] = {}
        for i, val in scan.examples.items():
            c = int(cols[i])
            if c not in ex or int(scan.first_pos[i]) == first_pos[r, c]:
                ex[c] = val
        examples.append(ex)
        last_examples.append({int(cols[i]): t for i, t in scan.last_examples.items()})
        mk: dict[int, MarkerTrack] = {}
        for i, track in scan.markers.items():
            c = int(cols[i])
            if c in mk:  # two shapes of one event: merge tracks in line order
                mk[c] = _merge_tracks(mk[c], track)
            else:
                mk[c] = track
        markers.append(mk)
    node_first_ts = np.array([s.node_first_ts for s in scans], np.float64)
    node_last_ts = np.array([s.node_last_ts for s in scans], np.float64)
    mtimes = [s.mtime for s in scans if s.mtime]
    _date_yearless(first_ts, last_ts, node_first_ts, node_last_ts, markers,
                   fallback=float(np.median(mtimes)) if mtimes else math.nan)
    warnings = list(spec.warnings)
    for scan in scans:
        warnings.extend(scan.warnings)
    return ParsedJob(
        job_id=spec.job_id,
        config_id=spec.config_id,
        framework=spec.framework,
        root=str(spec.root),
        nodes=[s.node for s in scans],
        files=[s.rel for s in scans],
        event_ids=event_ids,
        templates=[store.template(cid) for cid in event_ids],
        counts=counts,
        first_line=first_line,
        last_line=last_line,
        first_pos=first_pos,
        first_ts=first_ts,
        last_ts=last_ts,
        seqs=seqs,
        markers=markers,
        examples=examples,
        last_examples=last_examples,
        n_lines=np.array([s.n_lines for s in scans], np.int64),
        n_records=np.array([s.n_records for s in scans], np.int64),
        node_first_ts=node_first_ts,
        node_last_ts=node_last_ts,
        last_text=[s.last_text for s in scans],
        status=[s.status for s in scans],
        warnings=warnings,
        last_pos=last_pos,
        parts=[list(s.parts) for s in scans],
        launcher=launcher,
        file_info=[
            {"file": f.rel, "node": f.node, "lines": f.n_lines, "bytes": f.size,
             "status": f.status, "error": f.error}
            for s in scans for f in _own_files(s, own_files)
        ] + [{"file": u["file"], "node": None, "lines": 0, "bytes": 0,
              "status": "unreadable", "error": u["error"]}
             for u in getattr(spec, "unreadable", [])],
    )


def _own_files(scan: NodeScan, own: dict[tuple[str, str], NodeScan]) -> list[NodeScan]:
    """The files a node's stream read that are its own, each as scanned: one per file of a
    node that wrote several (``join_parts``); else the node's scan itself (a share of a
    gatherer's file is counted with the node's own file, as before)."""
    files = [own[(rel, scan.node)] for rel, _, _ in scan.parts if (rel, scan.node) in own]
    return files if len(files) > 1 else [scan]


def _date_yearless(first_ts: np.ndarray, last_ts: np.ndarray, node_first: np.ndarray,
                   node_last: np.ndarray, markers: list[dict[int, MarkerTrack]],
                   fallback: float = math.nan) -> None:
    """Put syslog and glog times ("Oct  9 12:42:15", "W1201 08:11:41.657", no year) into
    the year the job ran in, in place.

    The reference is a dated time of the same node, else of the job: kernel lines then
    line up with the training stack's own clock.  A job whose lines carry no year at all
    (torchrun's glog lines and nothing else) is placed by its files' modification time,
    which is when their last line was written.
    """
    dated = first_ts[~np.isnan(first_ts) & (first_ts >= YEARLESS_MAX)]
    job_ref = float(np.median(dated)) if dated.size else fallback
    for r in range(first_ts.shape[0]):
        row = first_ts[r]
        if not (row < YEARLESS_MAX).any() and not (node_first[r] < YEARLESS_MAX) and not (
            node_last[r] < YEARLESS_MAX
        ):
            continue
        own = row[~np.isnan(row) & (row >= YEARLESS_MAX)]
        ref = float(np.median(own)) if own.size else job_ref
        first_ts[r] = place_yearless(first_ts[r], ref)
        last_ts[r] = place_yearless(last_ts[r], ref)
        node_first[r], node_last[r] = place_yearless(np.array([node_first[r], node_last[r]]), ref)
        for track in markers[r].values():
            if (track.ts < YEARLESS_MAX).any():
                track.ts = place_yearless(track.ts, ref)  # a copy: cached scans stay as read


def _merge_tracks(a: MarkerTrack, b: MarkerTrack) -> MarkerTrack:
    order = np.argsort(np.concatenate([a.positions, b.positions]), kind="stable")
    out = MarkerTrack(field_step=a.field_step, width=a.width,
                      duration_field=a.duration_field or b.duration_field,
                      period=getattr(a, "period", 0.0) or getattr(b, "period", 0.0),
                      total=getattr(a, "total", 0.0) or getattr(b, "total", 0.0),
                      base=_first_base(a, b))
    out.bar = getattr(a, "bar", False) or getattr(b, "bar", False)
    for name in ("positions", "lines", "numbers", "ts", "durations", "elapsed"):
        setattr(out, name, np.concatenate([per_line(a, name, len(a.positions)),
                                           per_line(b, name, len(b.positions))])[order])
    if (a.field_step and b.field_step and a.field_step[0] != b.field_step[0]
            and _drops(out.numbers) > 2 * max(_drops(a.numbers), _drops(b.numbers)) + 2):
        # two line shapes that became one template count different numbers (a progress
        # bar's epoch in one, its batch in the other: together they go back and forth);
        # their numbers cannot be mixed, so the track that counts more keeps the column
        return max((a, b), key=_counting_power)
    return out


def _first_base(a: MarkerTrack, b: MarkerTrack) -> float:
    """The epochs before the first line of two tracks joined: the earlier track's."""
    if not b.positions.size:
        return float(getattr(a, "base", 0.0) or 0.0)
    if not a.positions.size or b.positions.min() < a.positions.min():
        return float(getattr(b, "base", 0.0) or 0.0)
    return float(getattr(a, "base", 0.0) or 0.0)


def _counting_power(t: MarkerTrack) -> tuple[bool, int]:
    """A counter that starts over at a known total counts more than any plain one of the
    same lines; otherwise the one with more distinct counts."""
    return (float(getattr(t, "period", 0.0) or 0.0) > 0, int(np.unique(t.numbers).size))


def _drops(num: np.ndarray) -> int:
    """How often a sequence of counts goes back."""
    return int((np.diff(num[~np.isnan(num)]) < 0).sum())


_STDERR = re.compile(r"(?:^|[^a-z])(?:std)?err(?:or)?s?(?:[^a-z]|$)", re.I)


def _part_order(s: NodeScan) -> tuple[float, bool, str]:
    """Where a file goes in its node's stream: the file holding the node's last words
    last (a rotated ``.log.gz`` ends before the current file begins; a traceback ends a
    run), by the time of its last record; untimed, a stderr file after its stdout."""
    last = -math.inf if math.isnan(s.node_last_ts) else s.node_last_ts
    return last, bool(_STDERR.search(Path(s.rel).name)), s.rel


def join_parts(scans: list[NodeScan]) -> list[NodeScan]:
    """One scan per node when a node wrote several files (``l4.ingest.discover`` gives
    them one node id): read one after the other, the node's last words last."""
    groups: dict[str, list[int]] = {}
    for k, s in enumerate(scans):
        if not s.gathered:
            groups.setdefault(s.node, []).append(k)
    if all(len(g) == 1 for g in groups.values()):
        return scans
    first = {g[0]: g for g in groups.values() if len(g) > 1}
    dropped = {k for g in first.values() for k in g[1:]}
    out = []
    for k, s in enumerate(scans):
        if k in dropped:
            continue
        if k in first:
            parts = sorted((scans[j] for j in first[k]), key=_part_order)
            s = parts[0]
            for b in parts[1:]:
                s = _join(s, b)
        out.append(s)
    return out


def join_gathered(scans: list[NodeScan]) -> list[NodeScan]:
    """One scan per node: a node's own file followed by its share of a gatherer's file
    (``l4.gather``; the share is the scan marked ``gathered``)."""
    if not any(s.gathered for s in scans):
        return scans
    own = {s.node: k for k, s in enumerate(scans) if not s.gathered}
    out = list(scans)
    drop = set()
    for k, s in enumerate(scans):
        if not s.gathered:
            continue
        j = own.get(s.node)
        if j is None:
            out[k] = replace(s, gathered=False, parts=[(s.rel, 0, 0)])
            own[s.node] = k
            continue
        out[j] = _join(out[j], s)
        drop.add(k)
    return [s for k, s in enumerate(out) if k not in drop]


def _join(a: NodeScan, b: NodeScan) -> NodeScan:
    """Scan ``a`` then scan ``b`` as one stream of records (positions of ``b`` follow
    ``a``'s; line numbers stay each file's, ``parts`` says which file a position is in)."""
    index = {sh: i for i, sh in enumerate(a.shapes)}
    shapes = list(a.shapes)
    to = np.empty(len(b.shapes), np.int64)
    for i, sh in enumerate(b.shapes):
        if sh not in index:
            index[sh] = len(shapes)
            shapes.append(sh)
        to[i] = index[sh]
    m, off = len(shapes), int(a.n_records)
    lines = int(a.n_lines)  # b's line numbers run on after a's: the stream's stay in order

    def grown(arr: np.ndarray, fill: float, dtype: type) -> np.ndarray:
        out = np.full(m, fill, dtype)
        out[: len(arr)] = arr
        return out

    counts = grown(a.counts, 0, np.int64)
    first_line, last_line = grown(a.first_line, 0, np.int64), grown(a.last_line, 0, np.int64)
    first_pos, last_pos = grown(a.first_pos, 0, np.int64), grown(a.last_pos, 0, np.int64)
    first_ts, last_ts = grown(a.first_ts, math.nan, np.float64), grown(a.last_ts, math.nan, np.float64)
    examples, last_examples = dict(a.examples), dict(a.last_examples)
    for i, k in enumerate(to.tolist()):
        if not b.counts[i]:
            continue
        if not counts[k]:
            first_line[k], first_pos[k] = b.first_line[i] + lines, b.first_pos[i] + off
            first_ts[k] = b.first_ts[i]
            if i in b.examples:
                line, text, ctx = b.examples[i]
                examples[k] = (line + lines, text, ctx)
        counts[k] += b.counts[i]
        last_line[k], last_pos[k] = b.last_line[i] + lines, b.last_pos[i] + off
        if not math.isnan(b.last_ts[i]):
            last_ts[k] = b.last_ts[i]
        if i in b.last_examples:
            last_examples[k] = b.last_examples[i]
    markers = dict(a.markers)
    for i, track in b.markers.items():
        k = int(to[i])
        moved = replace(track, positions=track.positions + off, lines=track.lines + lines)
        if k in markers:
            t = markers[k]
            moved = replace(t, **{f: np.concatenate([getattr(t, f), getattr(moved, f)])
                                  for f in ("positions", "lines", "numbers", "ts", "durations")})
        markers[k] = moved
    seq = np.concatenate([a.seq, to.astype(np.uint32)[b.seq] if b.seq.size else b.seq])
    nan_first = math.isnan(a.node_first_ts)
    return replace(
        a, shapes=shapes, counts=counts, first_line=first_line, last_line=last_line,
        first_pos=first_pos, last_pos=last_pos, first_ts=first_ts, last_ts=last_ts,
        examples=examples, last_examples=last_examples, markers=markers,
        seq=seq.astype(np.uint32), n_lines=a.n_lines + b.n_lines,
        n_records=a.n_records + b.n_records,
        status="ok" if "ok" in (a.status, b.status) else a.status,
        warnings=a.warnings + b.warnings,
        node_first_ts=b.node_first_ts if nan_first else float(np.nanmin([a.node_first_ts, b.node_first_ts])),
        node_last_ts=float(np.nanmax([a.node_last_ts, b.node_last_ts]))
        if not (math.isnan(a.node_last_ts) and math.isnan(b.node_last_ts)) else math.nan,
        last_text=b.last_text or a.last_text,
        parts=[*(a.parts or [(a.rel, 0, 0)]), (b.rel, off, lines)],
    )
