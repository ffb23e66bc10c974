"""Job directories, node files and the byte stream of each file.

A job is ``JOB/job.json`` (optional) plus ``JOB/logs/**`` with one file per node.  Reading is
done in large binary blocks that always end on a line boundary, so that the scanner can use
``bytes`` operations implemented in C on whole blocks; memory stays bounded by the block size
whatever the file size, and a single pathological line is cut, never buffered whole.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

LOG_SUFFIXES = (".log", ".out", ".txt", ".err")
BLOCK_SIZE = 8 << 20
#: Lines longer than this are cut for parsing (the rest of the line is skipped, not buffered).
MAX_LINE = 4096
#: job.json is a few fields; anything bigger is not one.
MAX_JOB_JSON = 16 << 20

#: the end of a progress bar update ("| 24/60 [00:01<00:02, 14.02it/s, loss=1.6]") that
#: something else was written right after, on the same line.  A bar leaves the cursor at
#: the end of its line, so the next print (a "***** Running Evaluation *****" banner, a
#: loss dict, a traceback, or torchrun's prefix of the next line) is glued to it
#: (found from its rate's "/", the one literal every update has, so a block of bar updates
#: costs a fast scan; what precedes the "/" is checked on the rare hit)
_BAR_GLUE = re.compile(rb"/(?:s|it)(?:\]|,[^\]\n]*\])(?=[^\n])")
_RATE_DIGITS = frozenset(b"0123456789?")


def _glued(m: re.Match[bytes]) -> bytes:
    """The match and a line end, if it ends a bar's rate ("14.02it/s, ...]", "1.5s/it]")."""
    data, i, text = m.string, m.start(), m.group(0)
    if text.startswith(b"/s"):
        rate = data[i - 2:i] == b"it" and i >= 3 and data[i - 3] in _RATE_DIGITS
    else:
        rate = data[i - 1:i] == b"s" and i >= 2 and data[i - 2] in _RATE_DIGITS
    return text + b"\n" if rate else text



class JobError(Exception):
    """A job directory that cannot be diagnosed at all (missing, no node files, bad job.json)."""


@dataclass(frozen=True)
class NodeFile:
    """One node's log file: its node id, absolute path and path relative to the job root,
    and, for a file that gathers several nodes' output, which of its lines are this node's."""

    node: str
    path: Path
    rel: str
    #: read only the lines tagged with this node (``l4.gather``: another node gathered them)
    origin: str = ""
    #: read every line but those tagged with these nodes (``l4.gather``: they are theirs)
    routed: tuple[str, ...] = ()
    #: read only the records of a collector's export that name this node (``l4.wrapped``)
    record_node: str = ""


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
    #: log-named entries that are not readable files: {"file", "status", "error"}
    unreadable: list[dict] = field(default_factory=list)


#: a pod's log directory as the kubelet names it: ``<namespace>_<pod>_<pod uid>``
_POD_DIR = re.compile(r"^[a-z0-9][a-z0-9-]*_(?P<pod>[a-z0-9][a-z0-9.-]*)_[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}$")


def node_id_for(path: Path) -> str:
    """``logs/worker-17.log.gz`` -> ``worker-17``: the name without its log/compression suffixes.

    The kubelet stores a container's log as ``<ns>_<pod>_<uid>/<container>/0.log`` (the
    number counts restarts): copied from ``/var/log/pods`` every node's file is ``0.log``,
    so there the pod names the node."""
    name = path.name
    if name.endswith(".gz"):
        name = name[:-3]
    for suffix in LOG_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if name.isdigit():
        pod = _POD_DIR.match(path.parent.parent.name)
        if pod:
            return pod.group("pod")
    return name


def _directory_names(paths: list[Path], base: Path) -> dict[Path, str]:
    """Node ids from directories, for files whose names do not tell nodes apart.

    Collected per node, every node's log has the same name (``node3/train.log``,
    ``node7/train.log``): the directory under ``logs/`` is the node, and so is it for the
    other files in it (``node3/dmesg.log``, per-rank ``node3/attempt_0/1/stderr.log``).
    Used only where files of one name lie under two or more such directories; otherwise
    the file names stand."""
    groups: dict[str, list[Path]] = {}
    for p in paths:
        groups.setdefault(node_id_for(p), []).append(p)
    out: dict[Path, str] = {}
    for same in groups.values():
        if len(same) < 2:
            continue
        tops = [p.relative_to(base).parts[0] if len(p.relative_to(base).parts) > 1 else None
                for p in same]
        # one such file per directory, or several (``host/attempt_0/<rank>/stdout.log``:
        # a launcher's per-rank files, joined into their node) under two or more directories
        if None not in tops and len(set(tops)) >= 2:
            out.update(zip(same, tops, strict=True))
    # per-node directories: every file in one is that node's (its dmesg, its stderr)
    named = set(out.values())
    for p in paths:
        parts = p.relative_to(base).parts
        if p not in out and len(parts) > 1 and parts[0] in named:
            out[p] = parts[0]
    return out


def has_log_name(path: Path) -> bool:
    """A name l4 reads as a node file (``*.log``, ``*.out``, ... optionally ``.gz``)."""
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return name.endswith(LOG_SUFFIXES)


def is_log_file(path: Path) -> bool:
    return path.is_file() and has_log_name(path)


def unreadable_reason(path: Path) -> str | None:
    """Why an entry with a log file's name cannot be read, or None for a regular file.

    Checked with ``lstat``/``stat`` only, never by opening: a FIFO would block the reader.
    """
    try:
        lst = path.lstat()
    except OSError as exc:
        return f"cannot stat: {exc.strerror or exc}"
    if stat.S_ISREG(lst.st_mode):
        return None
    if stat.S_ISLNK(lst.st_mode):
        try:
            st = path.stat()
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return "symlink loop"
            if exc.errno == errno.ENOENT:
                return "broken symlink (target does not exist)"
            return f"symlink cannot be followed: {exc.strerror or exc}"
        if stat.S_ISREG(st.st_mode):
            return None
        return f"symlink to {file_kind(st.st_mode)}, not a regular file; not read"
    return f"{file_kind(lst.st_mode)}, not a regular file; not read"


def _read_job_json(meta_path: Path, warnings: list[str]) -> dict:
    """job.json as a dict of well-typed fields; anything else is a warning, never fatal."""
    reason = unreadable_reason(meta_path)
    if reason:
        warnings.append(f"{meta_path}: ignored ({reason})")
        return {}
    try:
        if meta_path.stat().st_size > MAX_JOB_JSON:
            raise ValueError(f"larger than {MAX_JOB_JSON >> 20} MB")
        with open_regular(meta_path) as fh:
            meta = json.loads(fh.read().decode("utf-8"))
        if not isinstance(meta, dict):
            raise ValueError(f"top level is {type(meta).__name__}, not an object")
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        warnings.append(f"{meta_path}: ignored, not valid JSON ({exc})")
        return {}
    out: dict = {}
    for key in ("job_id", "config_id", "status", "framework"):
        v = meta.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            warnings.append(f"{meta_path}: {key!r} ignored (a {type(v).__name__}, expected a string)")
            continue
        out[key] = str(v)
    nodes = meta.get("nodes")
    if nodes is not None:
        if isinstance(nodes, dict):
            out["nodes"] = {str(k): str(v) for k, v in nodes.items()
                            if isinstance(v, str | int) and not isinstance(v, bool) and str(v)}
        else:
            warnings.append(f"{meta_path}: 'nodes' ignored (a {type(nodes).__name__}, "
                            "expected an object mapping files to node ids)")
    return out


def discover(job_dir: str | Path) -> JobSpec:
    """Read ``job.json`` and list node files; raise :class:`JobError` when nothing is usable.

    Entries that carry a log file's name but cannot be read (a FIFO, a directory, a broken
    symlink, a symlink loop) are listed in ``unreadable`` with the reason, never opened.
    """
    root = Path(job_dir)
    if not root.exists():
        raise JobError(f"job directory {root} does not exist")
    if not root.is_dir():
        raise JobError(f"{root} is not a directory (expected JOB/ with logs/ inside)")
    warnings: list[str] = []
    meta_path = root / "job.json"
    meta = _read_job_json(meta_path, warnings) if os.path.lexists(meta_path) else {}
    logs_dir = root / "logs"
    base = logs_dir if logs_dir.is_dir() else root
    mapping = meta.get("nodes") or {}
    files: list[NodeFile] = []
    unreadable: list[dict] = []
    seen: dict[str, list[str]] = {}
    try:
        entries = sorted(base.rglob("*"))
    except OSError as exc:
        raise JobError(f"cannot list {base}: {exc.strerror or exc}") from exc
    readable = []
    for path in entries:
        if not has_log_name(path):
            continue
        rel = path.relative_to(root).as_posix()
        reason = unreadable_reason(path)
        if reason:
            unreadable.append({"file": rel, "status": "unreadable", "error": reason})
            warnings.append(f"{rel}: not read ({reason})")
            continue
        readable.append((path, rel))
    by_dir = _directory_names([p for p, _ in readable], base)
    for path, rel in readable:
        node = str(mapping.get(rel) or by_dir.get(path) or node_id_for(path))
        # several files of one node (``.out`` and ``.err``, a rotated ``.log.gz``,
        # per-rank files): one node whose stream reads them all (l4.merge.join_parts)
        seen.setdefault(node, []).append(rel)
        files.append(NodeFile(node=node, path=path, rel=rel))
    several = {n: rels for n, rels in seen.items() if len(rels) > 1}
    if several:
        node, rels = next(iter(several.items()))
        warnings.append(f"{len(several)} node(s) wrote several files, each read as one node's "
                        f"stream (e.g. {node}: {', '.join(rels[:3])}{', ...' if len(rels) > 3 else ''})")
    if not files:
        extra = f"; {len(unreadable)} unreadable: " + "; ".join(
            f"{u['file']} ({u['error']})" for u in unreadable[:3]) if unreadable else ""
        raise JobError(
            f"no node log files under {base} (looked for *{', *'.join(LOG_SUFFIXES)} and .gz)"
            + extra
        )
    from l4.gather import split_gathered  # reads file heads: a gatherer is split by origin
    from l4.wrapped import split_exports  # ... and a collector's export of several nodes

    files, notes = split_exports(files)
    warnings.extend(notes)
    files, notes = split_gathered(files)
    warnings.extend(notes)
    return JobSpec(
        root=root,
        job_id=str(meta.get("job_id") or root.resolve().name),
        config_id=meta.get("config_id"),
        status=meta.get("status"),
        framework=meta.get("framework"),
        files=files,
        warnings=warnings,
        unreadable=unreadable,
    )


def _log_entries(root: Path) -> Iterator[os.stat_result]:
    """lstat of every regular file with a log name under ``root/logs`` (else ``root``);
    symlinks are not followed, so the walk cannot loop and the shell emitter agrees."""
    base = root / "logs" if (root / "logs").is_dir() else root
    for dirpath, _dirs, names in os.walk(base, followlinks=False):
        for name in names:
            if not has_log_name(Path(name)):
                continue
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                yield st


def logs_fingerprint(job_dir: str | Path) -> str:
    """``files:bytes:newest mtime (ns)`` of the node files: changes when any log changes,
    so a re-delivered event for logs that grew since is diagnosed again."""
    n = total = newest = 0
    for st in _log_entries(Path(job_dir)):
        n, total, newest = n + 1, total + st.st_size, max(newest, st.st_mtime_ns)
    return f"{n}:{total}:{newest}"


def failure_key(job_dir: str | Path, *, job_id: str | None = None,
                end_time: str | None = None) -> str:
    """The id of one failure, the same however often (and by whom) it is reported.

    ``job:<job id>@<end time>`` when the scheduler says when the job ended, else
    ``dir:<absolute log directory>@<newest log mtime, whole seconds>``, which
    ``deployments/l4-emit.sh`` computes the same way with ``find``.
    """
    if job_id and end_time:
        return f"job:{job_id}@{end_time}"
    root = Path(job_dir).expanduser().absolute()
    newest = max((st.st_mtime_ns for st in _log_entries(root)), default=0)
    return f"dir:{root}@{newest // 1_000_000_000}"


@dataclass
class ReadStats:
    """What reading one file found wrong (filled while :func:`read_blocks` streams)."""

    bytes_read: int = 0
    truncated: bool = False
    error: str | None = None
    long_lines: int = 0
    #: what an unwrapper (``l4.wrapped``) noticed about the file, for the report's warnings
    notes: list[str] = field(default_factory=list)


class _GzipReader:
    """Streaming gunzip over raw reads: unlike ``gzip.open().read(n)``, data decoded before a
    truncation or a corrupt member is still returned; the problem is raised afterwards.

    Inflation is bounded (``max_length``): a few MB of compressed NULs that inflate to GBs
    cost one block of memory, exactly like a plain file, never the inflated size.
    """

    def __init__(self, fh: BinaryIO):
        self.fh = fh
        self.dec = zlib.decompressobj(wbits=31)
        self.tail = b""  # compressed input not yet inflated (max_length stopped early)
        self.pending: Exception | None = None
        self.done = False

    def _inflate(self, raw: bytes, room: int) -> bytes:
        out = self.dec.decompress(raw, room)
        self.tail = self.dec.unconsumed_tail
        if self.dec.eof and self.dec.unused_data:  # multi-member gzip: next member
            rest = self.dec.unused_data
            self.dec = zlib.decompressobj(wbits=31)
            self.tail = rest
        return out

    def read(self, size: int) -> bytes:
        if self.pending is not None:
            exc, self.pending = self.pending, None
            raise exc
        out: list[bytes] = []
        have = 0
        while have < size and not self.done:
            if self.tail:
                raw = self.tail
            else:
                raw = self.fh.read(1 << 20)
                if not raw:
                    self.done = True
                    if not self.dec.eof:
                        self.pending = EOFError(
                            "compressed file ended before the end-of-stream marker")
                    break
            try:
                chunk = self._inflate(raw, size - have)
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


class NotRegularFile(OSError):
    """A path that is not a regular file (FIFO, socket, device, directory): never read."""


def file_kind(mode: int) -> str:
    """What a stat mode is, in words for the report ("a FIFO", "a directory", ...)."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: Path) -> BinaryIO:
    """Open ``path`` for reading only if it is a regular file.

    ``O_NONBLOCK`` makes opening a FIFO return at once instead of waiting for a writer,
    and the type is checked on the opened descriptor (``fstat``), so a file swapped for a
    FIFO after discovery is still refused without one byte being read.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"{file_kind(st.st_mode)}, not a regular file; not read")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def raw_stream(path: Path):
    fh = open_regular(path)
    if path.name.endswith(".gz"):
        return _GzipReader(fh)
    return fh


def read_blocks(path: Path, stats: ReadStats, block_size: int = BLOCK_SIZE,
                max_line: int = MAX_LINE, unglue: bool = True) -> Iterator[bytes]:
    """Yield blocks of whole lines (each ending in ``\\n`` except maybe the last); a bare
    ``\\r`` ends a line as ``\\n`` does, and ``\\r\\n`` is one line end.

    Lines longer than ``max_line`` (:data:`MAX_LINE`) are cut to that length; the remainder
    is skipped as it streams by, so a 50 MB single line costs one block of memory.  ``unglue``:
    break the lines glued to a progress bar (``split_bar_glue``); a reader of wrapped lines
    (``l4.wrapped``) does that once they are unwrapped.  A truncated or corrupt
    gzip stops the stream with ``stats.truncated``/``stats.error`` set; what was read before
    is kept.
    """
    try:
        fh = raw_stream(path)
    except NotRegularFile as exc:
        stats.error = str(exc)
        return
    except OSError as exc:
        stats.error = f"cannot open: {exc.strerror or exc}"
        return
    carry = b""
    skipping = False
    cr_pending = False
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
            if cr_pending and data[:1] == b"\n":  # "\r\n" split across two reads
                data = data[1:]
            cr_pending = False
            if not data:
                continue
            cr_pending = data[-1:] == b"\r"
            if b"\r" in data:
                # a carriage return ends a line too: progress bars (tqdm, as Hugging Face
                # Trainer and DeepSpeed print them) rewrite one terminal line with "\r", so
                # a log file holds thousands of updates on one physical line, and the last
                # one (where training stopped) would be cut off with the rest of a long line
                data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if skipping:
                nl = data.find(b"\n")
                if nl < 0:
                    continue
                data = data[nl + 1 :]
                skipping = False
            data = carry + data if carry else data
            if unglue and (b"it/s" in data or b"s/it" in data):
                data = split_bar_glue(data)
            nl = data.rfind(b"\n")
            if nl < 0:
                carry = data
            else:
                block, carry = data[: nl + 1], data[nl + 1 :]
                if block:
                    yield cut_long_lines(block, stats, max_line)
            if len(carry) > max_line:
                # Unterminated giant line: keep its head, drop the tail as it arrives.
                stats.long_lines += 1
                yield carry[:max_line] + b"\n"
                carry = b""
                skipping = True
    if carry:
        yield cut_long_lines(carry, stats, max_line)


def split_bar_glue(data: bytes) -> bytes:
    """Break a line after each progress-bar update that other output was glued to.

    The glued text is a line of its own to the program that printed it; read as part of
    the bar it would take the bar's place (a banner that starts an evaluation read as one
    more training step)."""
    return _BAR_GLUE.sub(_glued, data)


def cut_long_lines(block: bytes, stats: ReadStats, max_line: int = MAX_LINE) -> bytes:
    """Cut lines over ``max_line`` inside a block; fast when there are none (the usual case)."""
    if len(block) <= max_line:
        return block
    nl = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
    bounds = np.concatenate(([-1], nl, [len(block)]))
    if int(np.diff(bounds).max()) - 1 <= max_line:
        return block
    lines = block.split(b"\n")
    out = []
    for line in lines:
        if len(line) > max_line:
            stats.long_lines += 1
            line = line[:max_line]
        out.append(line)
    return b"\n".join(out)
