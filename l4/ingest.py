"""Job directories, node files and the byte stream of each file.

A job is ``JOB/job.json`` (optional) plus ``JOB/logs/**`` with one file per node.  Reading is
done in large binary blocks that always end on a line boundary, so that the scanner can use
``bytes`` operations implemented in C on whole blocks; memory stays bounded by the block size
whatever the file size, and a single pathological line is cut, never buffered whole.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

LOG_SUFFIXES = (".log", ".out", ".txt", ".err")
BLOCK_SIZE = 8 << 20
#: Lines longer than this are cut for parsing (the rest of the line is skipped, not buffered).
MAX_LINE = 4096


class JobError(Exception):
    """A job directory that cannot be diagnosed at all (missing, no node files, bad job.json)."""


@dataclass(frozen=True)
class NodeFile:
    """One node's log file: its node id, absolute path and path relative to the job root."""

    node: str
    path: Path
    rel: str


@dataclass
class JobSpec:
    """What a job directory says about itself."""

    root: Path
    job_id: str
    config_id: str | None = None
    status: str | None = None
    framework: str | None = None
    files: list[NodeFile] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def node_id_for(path: Path) -> str:
    """``logs/worker-17.log.gz`` -> ``worker-17``: the name without its log/compression suffixes."""
    name = path.name
    if name.endswith(".gz"):
        name = name[:-3]
    for suffix in LOG_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def is_log_file(path: Path) -> bool:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return path.is_file() and name.endswith(LOG_SUFFIXES)


def discover(job_dir: str | Path) -> JobSpec:
    """Read ``job.json`` and list node files; raise :class:`JobError` when nothing is usable."""
    root = Path(job_dir)
    if not root.exists():
        raise JobError(f"job directory {root} does not exist")
    if not root.is_dir():
        raise JobError(f"{root} is not a directory (expected JOB/ with logs/ inside)")
    meta: dict = {}
    warnings: list[str] = []
    meta_path = root / "job.json"
    if meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if not isinstance(meta, dict):
                raise ValueError("top level is not an object")
        except (ValueError, UnicodeDecodeError) as exc:
            warnings.append(f"{meta_path}: ignored, not valid JSON ({exc})")
            meta = {}
    logs_dir = root / "logs"
    base = logs_dir if logs_dir.is_dir() else root
    mapping = meta.get("nodes") if isinstance(meta.get("nodes"), dict) else {}
    files: list[NodeFile] = []
    seen: dict[str, str] = {}
    for path in sorted(base.rglob("*")):
        if not is_log_file(path):
            continue
        rel = path.relative_to(root).as_posix()
        node = str(mapping.get(rel) or node_id_for(path))
        if node in seen:
            # Two files for one node (e.g. .out and .err): keep both, distinct ids.
            warnings.append(f"{rel}: node id {node!r} already used by {seen[node]}; named {node}@{rel}")
            node = f"{node}@{rel}"
        seen[node] = rel
        files.append(NodeFile(node=node, path=path, rel=rel))
    if not files:
        raise JobError(
            f"no node log files under {base} (looked for *{', *'.join(LOG_SUFFIXES)} and .gz)"
        )
    return JobSpec(
        root=root,
        job_id=str(meta.get("job_id") or root.resolve().name),
        config_id=str(meta["config_id"]) if meta.get("config_id") is not None else None,
        status=meta.get("status"),
        framework=meta.get("framework"),
        files=files,
        warnings=warnings,
    )


@dataclass
class ReadStats:
    """What reading one file found wrong (filled while :func:`read_blocks` streams)."""

    bytes_read: int = 0
    truncated: bool = False
    error: str | None = None
    long_lines: int = 0


class _GzipReader:
    """Streaming gunzip over raw reads: unlike ``gzip.open().read(n)``, data decoded before a
    truncation or a corrupt member is still returned; the problem is raised afterwards."""

    def __init__(self, path: Path):
        self.fh = open(path, "rb")
        self.dec = zlib.decompressobj(wbits=31)
        self.pending: Exception | None = None
        self.done = False

    def read(self, size: int) -> bytes:
        if self.pending is not None:
            exc, self.pending = self.pending, None
            raise exc
        out: list[bytes] = []
        have = 0
        while have < size and not self.done:
            raw = self.fh.read(1 << 20)
            if not raw:
                self.done = True
                if not self.dec.eof:
                    self.pending = EOFError("compressed file ended before the end-of-stream marker")
                break
            try:
                chunk = self.dec.decompress(raw)
                while self.dec.eof and self.dec.unused_data:  # multi-member gzip
                    rest = self.dec.unused_data
                    self.dec = zlib.decompressobj(wbits=31)
                    chunk += self.dec.decompress(rest)
            except zlib.error as exc:
                self.done = True
                self.pending = exc
                break
            out.append(chunk)
            have += len(chunk)
        data = b"".join(out)
        if not data and self.pending is not None:
            exc, self.pending = self.pending, None
            raise exc
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.fh.close()


def _raw_stream(path: Path):
    if path.name.endswith(".gz"):
        return _GzipReader(path)
    return open(path, "rb")


def read_blocks(path: Path, stats: ReadStats, block_size: int = BLOCK_SIZE) -> Iterator[bytes]:
    """Yield blocks of whole lines (each ending in ``\\n`` except maybe the last).

    Lines longer than :data:`MAX_LINE` are cut to that length; the remainder is skipped as it
    streams by, so a 50 MB single line costs one block of memory.  A truncated or corrupt
    gzip stops the stream with ``stats.truncated``/``stats.error`` set; what was read before
    is kept.
    """
    try:
        fh = _raw_stream(path)
    except OSError as exc:
        stats.error = f"cannot open: {exc}"
        return
    carry = b""
    skipping = False
    with fh:
        while True:
            try:
                data = fh.read(block_size)
            except (EOFError, zlib.error, OSError) as exc:
                stats.truncated = True
                stats.error = f"stream ends early after {stats.bytes_read} bytes ({exc})"
                break
            if not data:
                break
            stats.bytes_read += len(data)
            if skipping:
                nl = data.find(b"\n")
                if nl < 0:
                    continue
                data = data[nl + 1 :]
                skipping = False
            data = carry + data if carry else data
            nl = data.rfind(b"\n")
            if nl < 0:
                carry = data
            else:
                block, carry = data[: nl + 1], data[nl + 1 :]
                if block:
                    yield _cut_long_lines(block, stats)
            if len(carry) > MAX_LINE:
                # Unterminated giant line: keep its head, drop the tail as it arrives.
                stats.long_lines += 1
                yield carry[:MAX_LINE] + b"\n"
                carry = b""
                skipping = True
    if carry:
        yield _cut_long_lines(carry, stats)


def _cut_long_lines(block: bytes, stats: ReadStats) -> bytes:
    """Cut lines over MAX_LINE inside a block; fast when there are none (the usual case)."""
    if len(block) <= MAX_LINE:
        return block
    nl = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
    bounds = np.concatenate(([-1], nl, [len(block)]))
    if int(np.diff(bounds).max()) - 1 <= MAX_LINE:
        return block
    lines = block.split(b"\n")
    out = []
    for line in lines:
        if len(line) > MAX_LINE:
            stats.long_lines += 1
            line = line[:MAX_LINE]
        out.append(line)
    return b"\n".join(out)
