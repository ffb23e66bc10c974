"""Shared machinery of the foreign2 generator: the case context, per-node logs with
line tagging, time formatting and message builders for strings that several
frameworks share (torch c10d / NCCL / CUDA / torch elastic / Slurm).

Every message template here was taken from public source code or from real failure
reports; see README.md (catalogue) for the addresses.  Values (ranks, pids, ips,
times, sizes) are synthetic.
"""
from __future__ import annotations

import datetime as _dt
import random
import zlib

IND = "ind"   # indicator: the culprit's own root-cause output
SYM = "sym"   # symptom: propagated error on a peer, or launcher teardown

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


# --------------------------------------------------------------------------- time
def dt(t: float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(t, tz=_dt.UTC).replace(tzinfo=None)


def ts_logging(t: float) -> str:            # python logging asctime
    d = dt(t)
    return d.strftime("%Y-%m-%d %H:%M:%S") + ",%03d" % (d.microsecond // 1000)


def ts_plain(t: float) -> str:
    return dt(t).strftime("%Y-%m-%d %H:%M:%S")


def ts_iso(t: float, z: bool = True) -> str:
    d = dt(t)
    s = d.strftime("%Y-%m-%dT%H:%M:%S") + ".%03d" % (d.microsecond // 1000)
    return s + ("Z" if z else "+00:00")


def ts_slurm(t: float) -> str:
    return dt(t).strftime("%Y-%m-%dT%H:%M:%S")


def ts_syslog(t: float) -> str:
    d = dt(t)
    return "%s %2d %s" % (MONTHS[d.month - 1], d.day, d.strftime("%H:%M:%S"))


def ts_rich(t: float) -> str:
    return dt(t).strftime("[%m/%d/%y %H:%M:%S]")


def ts_glog_c10(t: float) -> str:
    """c10 / glog style used by torch >= 2.4 C++ logs: 'E1015 08:44:41.601553263'
    (month not zero padded, nanoseconds)."""
    d = dt(t)
    ns = d.microsecond * 1000 + int((t * 1e9) % 1000)
    return "%d%02d %s.%09d" % (d.month, d.day, d.strftime("%H:%M:%S"), ns)


def ts_glog_py(t: float) -> str:
    """torch.distributed elastic logging in torch >= 2.4: 'W0219 12:09:28.313000'."""
    d = dt(t)
    return "%02d%02d %s.%06d" % (d.month, d.day, d.strftime("%H:%M:%S"), d.microsecond)


def hms(sec: float) -> str:
    sec = int(max(sec, 0))
    h, r = divmod(sec, 3600)
    m, s = divmod(r, 60)
    return "%d:%02d:%02d" % (h, m, s) if h else "%02d:%02d" % (m, s)


# --------------------------------------------------------------------------- node log
class NodeLog:
    """One node's log: a list of physical lines plus tags for the truth file.

    A progress bar that has not yet written a newline is kept in ``open``; the next
    line written to the node is appended to it, as happens in a real file.

    Once a fault starts, writes are *deferred*: they are kept with their true time and
    sorted when flushed, because peers, launchers and the culprit are rendered one
    after the other but happen interleaved in time.  ``dead_at`` drops everything a
    node would have written after it lost power."""

    def __init__(self, job, idx: int):
        self.job = job
        self.idx = idx
        self.host = job.hosts[idx]
        self.ip = job.ips[idx]
        self.skew = job.skews[idx]
        self.lines: list[str] = []
        self.tags: dict[int, tuple[str, str]] = {}
        self.open: str | None = None
        self.now = 0.0
        self.deferred = False
        self.pending: list = []
        self.seq = 0
        self.dead_at: float | None = None
        self.truncate_last = False
        self.mute = False
        self.pids = [job.rng.randint(2000, 4_000_000) for _ in range(job.cfg.gpn + 2)]
        self.launcher_pid = self.pids[-1]

    def ln(self, t: float) -> float:
        """Local (skewed) clock of this node."""
        return t + self.skew

    def at(self, t: float) -> NodeLog:
        self.now = t
        return self

    @property
    def dead(self) -> bool:
        return self.dead_at is not None and self.now > self.dead_at

    def put(self, text: str, role: str | None = None, kind: str | None = None, t: float | None = None, force: bool = False):
        assert "\n" not in text, text
        if self.mute and not force:
            return
        if self.deferred:
            self.seq += 1
            self.pending.append((self.now if t is None else t, self.seq, "L", text, role, kind))
            return
        self._put(text, role, kind)

    def _put(self, text, role, kind):
        if self.open is not None:
            text = self.open + text
            self.open = None
        self.lines.append(text)
        if role:
            self.tags[len(self.lines) - 1] = (role, kind or "error")

    def partial(self, s: str, t: float | None = None):
        if self.mute:
            return
        if self.deferred:
            self.seq += 1
            self.pending.append((self.now if t is None else t, self.seq, "P", s, None, None))
            return
        self.open = (self.open or "") + s

    def close_partial(self):
        if self.deferred:
            self.seq += 1
            self.pending.append((self.now, self.seq, "C", "", None, None))
            return
        if self.open is not None:
            self.lines.append(self.open)
            self.open = None

    def flush(self):
        ev = sorted(self.pending, key=lambda e: (e[0], e[1]))
        self.pending = []
        self.deferred = False
        for t, _, typ, text, role, kind in ev:
            if self.dead_at is not None and t > self.dead_at:
                continue
            if typ == "L":
                self._put(text, role, kind)
            elif typ == "P":
                self.open = (self.open or "") + text
            elif self.open is not None:
                self.lines.append(self.open)
                self.open = None
        if self.dead_at is not None and self.truncate_last:
            # power lost while a line was being written: the file ends mid-line
            if self.open is not None:
                self.open = self.open[: max(8, len(self.open) * 2 // 3)]
            elif self.lines and (len(self.lines) - 1) not in self.tags:
                last = self.lines.pop()
                self.open = last[: max(8, len(last) * 2 // 3)]

    def text(self) -> str:
        body = "\n".join(self.lines)
        if self.open is not None:                      # file ends inside a line
            return body + ("\n" if self.lines else "") + self.open
        return body + ("\n" if self.lines else "")

    def finalize_lines(self) -> list[str]:
        out = list(self.lines)
        if self.open is not None:
            out.append(self.open)
        return out


def interleave(rng: random.Random, blocks: list[list]) -> list:
    """Merge per-rank line lists keeping each rank's order (processes writing whole
    lines into one file)."""
    idx = [0] * len(blocks)
    out = []
    total = sum(len(b) for b in blocks)
    while len(out) < total:
        cands = [i for i, b in enumerate(blocks) if idx[i] < len(b)]
        # bias toward continuing a few lines from the same rank
        i = rng.choice(cands)
        n = 1 if rng.random() < 0.6 else rng.randint(1, 4)
        for _ in range(n):
            if idx[i] < len(blocks[i]):
                out.append(blocks[i][idx[i]])
                idx[i] += 1
    return out


# --------------------------------------------------------------------------- torch c10 / NCCL
class TorchFlavour:
    """Version-dependent shapes of torch C++ log lines (ProcessGroupNCCL watchdog etc.)."""

    TABLE = {
        # (watchdog, exc_detected, timeout_at, some_ops, avoid, terminated, checkTimeout)
        (2, 1): (475, None, None, 489, 495, 916, 477),
        (2, 3): (563, None, 1537, 577, 583, 1414, 565),
        (2, 4): (607, 1664, 1709, 621, 627, 1515, 609),
        (2, 5): (616, 1785, 1834, 630, 636, 1595, 618),
        (2, 7): (629, 2168, None, 681, 695, 1895, 632),
    }

    def __init__(self, ver: tuple[int, int], libdir: str):
        self.ver = ver
        self.libdir = libdir
        self.lines = self.TABLE[ver]
        self.src = "/pytorch/torch/csrc" if ver >= (2, 7) else "../torch/csrc"

    @property
    def version_str(self):
        return {(2, 1): "2.1.2", (2, 3): "2.3.1", (2, 4): "2.4.1", (2, 5): "2.5.1", (2, 7): "2.7.1"}[self.ver]

    def c10(self, rank: int, sev: str, t: float, file: str, line: int) -> str:
        if self.ver < (2, 3):
            return "[%s %s:%d] " % (sev, file, line)
        if self.ver == (2, 3):
            return "[rank%d]:[%s %s:%d] " % (rank, sev, file, line)
        return "[rank%d]:[%s%s %s:%d] " % (rank, sev, ts_glog_c10(t), file, line)

    def pg(self, rank: int, pg: int = 0) -> str:
        if self.ver >= (2, 5):
            return "[PG ID %d PG GUID %d%s Rank %d]" % (pg, pg, "(default_pg)" if pg == 0 else "", rank)
        if self.ver == (2, 4):
            return "[PG %d%s Rank %d]" % (pg, " (default_pg)" if pg == 0 else "", rank)
        return "[PG %d Rank %d]" % (pg, rank)

    def py_prefix(self, rank: int) -> str:
        """torch >= 2.3 prefixes uncaught-exception tracebacks of ranks with '[rankN]: '."""
        return "[rank%d]: " % rank if self.ver >= (2, 3) else ""

    def frames(self, rng, kind: str) -> list[str]:
        lib = self.libdir + "/torch/lib"
        base = rng.randrange(0x7f0000000000, 0x7fffff000000) & ~0xfff
        if kind == "timeout":
            fr = [("c10::Error::Error(c10::SourceLocation, std::string) + 0x96", "libc10.so"),
                  ("c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2", "libtorch_cuda.so"),
                  ("c10d::ProcessGroupNCCL::watchdogHandler() + 0x233", "libtorch_cuda.so"),
                  ("c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c", "libtorch_cuda.so"),
                  ("<unknown function> + 0xdc253", "/lib/x86_64-linux-gnu/libstdc++.so.6"),
                  ("<unknown function> + 0x94ac3", "/lib/x86_64-linux-gnu/libc.so.6"),
                  ("clone + 0x44", "/lib/x86_64-linux-gnu/libc.so.6")]
        elif kind == "cuda":
            fr = [("c10::Error::Error(c10::SourceLocation, std::string) + 0x96", "libc10.so"),
                  ("c10::detail::torchCheckFail(char const*, char const*, unsigned int, std::string const&) + 0x64", "libc10.so"),
                  ("c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool) + 0x118", "libc10_cuda.so"),
                  ("c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x56", "libtorch_cuda.so"),
                  ("c10d::ProcessGroupNCCL::WorkNCCL::isCompleted() + 0x58", "libtorch_cuda.so"),
                  ("c10d::ProcessGroupNCCL::watchdogHandler() + 0x1a0", "libtorch_cuda.so"),
                  ("c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c", "libtorch_cuda.so"),
                  ("<unknown function> + 0xdc253", "/lib/x86_64-linux-gnu/libstdc++.so.6"),
                  ("<unknown function> + 0x94ac3", "/lib/x86_64-linux-gnu/libc.so.6"),
                  ("clone + 0x44", "/lib/x86_64-linux-gnu/libc.so.6")]
        else:  # watchdog thread rethrow
            fr = [("c10::Error::Error(c10::SourceLocation, std::string) + 0x96", "libc10.so"),
                  ("<unknown function> + 0xe5aa84", "libtorch_cuda.so"),
                  ("<unknown function> + 0xdc253", "/lib/x86_64-linux-gnu/libstdc++.so.6"),
                  ("<unknown function> + 0x94ac3", "/lib/x86_64-linux-gnu/libc.so.6"),
                  ("clone + 0x44", "/lib/x86_64-linux-gnu/libc.so.6")]
        out = []
        bases = {}
        for i, (sym, so) in enumerate(fr):
            path = so if so.startswith("/") else "%s/%s" % (lib, so)
            if path not in bases:
                bases[path] = (rng.randrange(0x7f0000000, 0x7ffffffff) << 12)
            off = int(sym.rsplit("+ 0x", 1)[1], 16) if "+ 0x" in sym else 0
            out.append("frame #%d: %s (0x%x in %s)" % (i, sym, bases[path] + (zlib.crc32(sym.encode()) & 0x1fffff) + off, path))
        return out


class Op:
    """One NCCL collective as torch's watchdog prints it."""

    def __init__(self, seq: int, op: str, numel_in: int, numel_out: int | None = None):
        self.seq, self.op, self.nin = seq, op, numel_in
        self.nout = numel_out if numel_out is not None else numel_in

    def work(self, tf: TorchFlavour, timeout_ms: int) -> str:
        if tf.ver < (2, 3):
            return "WorkNCCL(SeqNum=%d, OpType=%s, NumelIn=%d, NumelOut=%d, Timeout(ms)=%d)" % (
                self.seq, self.op, self.nin, self.nout, timeout_ms)
        return "WorkNCCL(SeqNum=%d, OpType=%s, NumelIn=%d, NumelOut=%d, Timeout(ms)=%d)" % (
            self.seq, self.op, self.nin, self.nout, timeout_ms)


def watchdog_timeout_block(tf: TorchFlavour, rng, rank: int, t: float, op: Op, timeout_ms: int,
                           frames: bool = True) -> list[tuple[str, str]]:
    """The lines a rank prints when its NCCL watchdog times out.  Returns (text, kind)
    pairs; the kind is 'nccl_timeout' for the message lines and ':context' otherwise."""
    W, EXC, TAT, SOME, AVOID, TERM, CHK = tf.lines
    ran = timeout_ms + rng.randint(3, 900)
    work = op.work(tf, timeout_ms)
    caught = "[Rank %d] Watchdog caught collective operation timeout: %s ran for %d milliseconds before timing out." % (rank, work, ran)
    K, C = "nccl_watchdog_timeout", "nccl_watchdog_timeout:context"
    out = [(tf.c10(rank, "E", t, "ProcessGroupNCCL.cpp", W) + caught, K)]
    t += 0.0003
    if tf.ver >= (2, 7):
        out.append((tf.c10(rank, "E", t, "ProcessGroupNCCL.cpp", EXC) + "%s  failure detected by watchdog at work sequence id: %d PG status: last enqueued work: %d, last completed work: %d" % (
            tf.pg(rank), op.seq, op.seq + rng.choice([0, 0, 1, 2]), op.seq - 1), K))
        out.append((tf.c10(rank, "E", t, "ProcessGroupNCCL.cpp", 667) + "Stack trace of the failed collective not found, potentially because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.", C))
    elif EXC:
        enq = op.seq + rng.choice([0, 0, 1, 2])
        out.append((tf.c10(rank, "E", t, "ProcessGroupNCCL.cpp", EXC) + "%s Exception (either an error or timeout) detected by watchdog at work: %d, last enqueued NCCL work: %d, last completed NCCL work: %d." % (
            tf.pg(rank), op.seq, enq, op.seq - 1), K))
        out.append((tf.c10(rank, "E", t, "ProcessGroupNCCL.cpp", TAT) + "%s Timeout at NCCL work: %d, last enqueued NCCL work: %d, last completed NCCL work: %d." % (
            tf.pg(rank), op.seq, enq, op.seq - 1), K))
    elif TAT:
        out.append((tf.c10(rank, "E", t, "ProcessGroupNCCL.cpp", TAT) + "%s Timeout at NCCL work: %d, last enqueued NCCL work: %d, last completed NCCL work: %d." % (
            tf.pg(rank), op.seq, op.seq, op.seq - 1), K))
    rk = "[Rank %d] " % rank if tf.ver >= (2, 3) else ""
    out.append((tf.c10(rank, "E", t, "ProcessGroupNCCL.cpp", SOME) + rk + "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.", K))
    out.append((tf.c10(rank, "E", t, "ProcessGroupNCCL.cpp", AVOID) + rk + "To avoid data inconsistency, we are taking the entire process down.", K))
    if tf.ver < (2, 3):
        term = "[Rank %d] NCCL watchdog thread terminated with exception: %s" % (rank, caught)
        out.append((tf.c10(rank, "E", t, "ProcessGroupNCCL.cpp", TERM) + term, K))
        out.append(("terminate called after throwing an instance of 'std::runtime_error'", K))
        out.append(("  what():  " + term, K))
        return out
    term = "%s Process group watchdog thread terminated with exception: %s" % (tf.pg(rank), caught)
    out.append((tf.c10(rank, "E", t, "ProcessGroupNCCL.cpp", TERM) + term, K))
    if frames:
        out.append(("Exception raised from checkTimeout at %s/distributed/c10d/ProcessGroupNCCL.cpp:%d (most recent call first):" % (tf.src, CHK), C))
        out += [(f, C) for f in tf.frames(rng, "timeout")]
        out.append(("", C))
    out.append(("terminate called after throwing an instance of 'c10::DistBackendError'", K))
    out.append(("  what():  " + term, K))
    if frames:
        out.append(("Exception raised from checkTimeout at %s/distributed/c10d/ProcessGroupNCCL.cpp:%d (most recent call first):" % (tf.src, CHK), C))
        out += [(f, C) for f in tf.frames(rng, "timeout")]
        out.append(("", C))
        out.append(("Exception raised from ncclCommWatchdog at %s/distributed/c10d/ProcessGroupNCCL.cpp:%d (most recent call first):" % (tf.src, TERM + 6), C))
        out += [(f, C) for f in tf.frames(rng, "rethrow")]
        out.append(("", C))
    return out


CUDA_TAIL_NEW = [
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
]
CUDA_TAIL_OLD = [
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
]


def cuda_tail(tf: TorchFlavour) -> list[str]:
    return CUDA_TAIL_NEW if tf.ver >= (2, 4) else CUDA_TAIL_OLD


def watchdog_cuda_error_block(tf: TorchFlavour, rng, rank: int, t: float, err: str) -> list[tuple[str, str]]:
    """The NCCL watchdog thread hitting a sticky CUDA error (ECC, NVLink ...)."""
    W, EXC, TAT, SOME, AVOID, TERM, CHK = tf.lines
    K, C = "cuda_error_watchdog", "cuda_error_watchdog:context"
    if tf.ver < (2, 3):
        msg = "[Rank %d] NCCL watchdog thread terminated with exception: CUDA error: %s" % (rank, err)
    else:
        msg = "%s Process group watchdog thread terminated with exception: CUDA error: %s" % (tf.pg(rank), err)
    head = tf.c10(rank, "E", t, "ProcessGroupNCCL.cpp", TERM) + msg
    out = [(head, K)] + [(x, C) for x in cuda_tail(tf)] + [("", C)]
    out.append(("Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 (most recent call first):", C))
    out += [(f, C) for f in tf.frames(rng, "cuda")]
    out.append(("", C))
    exc = "'c10::DistBackendError'" if tf.ver >= (2, 3) else "'std::runtime_error'"
    out.append(("terminate called after throwing an instance of %s" % exc, K))
    out.append(("  what():  " + msg, K))
    out += [(x, C) for x in cuda_tail(tf)]
    return out


# --------------------------------------------------------------------------- NCCL debug output
class Nccl:
    """NCCL_DEBUG output of one process: 'host:pid:tid [dev] NCCL INFO ...'."""

    def __init__(self, job, node: NodeLog, lrank: int):
        self.job, self.node, self.lrank = job, node, lrank
        self.pid = node.pids[lrank]
        self.tid0 = self.pid
        self.tid = self.pid + job.rng.randint(20, 400)

    def info(self, msg: str, main: bool = False) -> str:
        return "%s:%d:%d [%d] NCCL INFO %s" % (self.node.host, self.pid, self.tid0 if main else self.tid, self.lrank, msg)

    def warn(self, src: str, msg: str, main: bool = False) -> list[str]:
        # NCCL's WARN format starts with a newline, so a blank line precedes it
        return ["", "%s:%d:%d [%d] %s NCCL WARN %s" % (self.node.host, self.pid, self.tid0 if main else self.tid, self.lrank, src, msg)]

    def init_lines(self, ctx_rank: int, world: int, nnodes: int, gpn: int, comm_id: str, verbose: bool) -> list[str]:
        j, n = self.job, self.node
        c = j.cfg
        rng = j.rng
        out = []
        out.append(self.info("cudaDriverVersion %d" % c.cuda_driver, main=True))
        out.append(self.info("Bootstrap : Using %s:%s<0>" % (c.sock_if, n.ip), main=True))
        if c.net == "IB":
            out.append(self.info("NET/Plugin: No plugin found (libnccl-net.so)", main=True))
            out.append(self.info("NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory : when loading libnccl-net.so", main=True))
            out.append(self.info("NET/Plugin: Using internal network plugin.", main=True))
        if ctx_rank == 0:
            out.append("NCCL version %s+cuda%s" % (c.nccl_ver, c.cuda_ver))
        if c.net == "IB":
            hcas = " ".join("[%d]mlx5_%d:1/IB" % (i, i) for i in range(c.n_hca))
            out.append(self.info("NET/IB : Using %s ; OOB %s:%s<0>" % (hcas, c.sock_if, n.ip)))
            out.append(self.info("Using network IB"))
        else:
            out.append(self.info("NET/Socket : Using [0]%s:%s<0>" % (c.sock_if, n.ip)))
            out.append(self.info("Using network Socket"))
        busid = c.busids[self.lrank]
        out.append(self.info("ncclCommInitRank comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %s commId %s - Init START" % (
            rng.randrange(0x55d000000000, 0x55dfffffffff), ctx_rank, world, self.lrank, self.lrank, busid, comm_id)))
        if verbose:
            out.append(self.info("Setting affinity for GPU %d to %s" % (self.lrank, c.affinity[self.lrank % 2])))
            out.append(self.info("comm 0x%x rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0" % (
                rng.randrange(0x55d000000000, 0x55dfffffffff), ctx_rank, world, nnodes, gpn, self.lrank)))
            nxt = (ctx_rank + 1) % world
            prv = (ctx_rank - 1) % world
            out.append(self.info("Trees [0] %d/-1/-1->%d->%d [1] %d/-1/-1->%d->%d" % (nxt, ctx_rank, prv, nxt, ctx_rank, prv)))
            out.append(self.info("P2P Chunksize set to 524288"))
            for ch in range(rng.choice([2, 4])):
                if (ctx_rank + 1) % gpn == 0 and nnodes > 1:
                    out.append(self.info("Channel %02d/0 : %d[%d] -> %d[%d] [send] via NET/%s/%d/GDRDMA" % (
                        ch, ctx_rank, self.lrank, nxt, 0, "IB" if c.net == "IB" else "Socket", ch % max(c.n_hca, 1))))
                else:
                    out.append(self.info("Channel %02d/0 : %d[%d] -> %d[%d] via P2P/IPC/read" % (
                        ch, ctx_rank, self.lrank, nxt, (self.lrank + 1) % gpn)))
            out.append(self.info("Connected all rings"))
            out.append(self.info("Connected all trees"))
            out.append(self.info("threadThresholds 8/8/64 | %d/8/64 | 512 | 512" % (8 * world)))
            out.append(self.info("%d coll channels, %d collnet channels, 0 nvls channels, %d p2p channels, %d p2p channels per peer" % (
                c.nchan, c.nchan, 2 * c.nchan, 2)))
        out.append(self.info("ncclCommInitRank comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %s commId %s - Init COMPLETE" % (
            rng.randrange(0x55d000000000, 0x55dfffffffff), ctx_rank, world, self.lrank, self.lrank, busid, comm_id)))
        return out


def nccl_err_str(code: str) -> str:
    return {"ncclSystemError": "unhandled system error (run with NCCL_DEBUG=INFO for details)",
            "ncclRemoteError": "remote process exited or there was a network error",
            "ncclInternalError": "internal error - please report this issue to the NCCL developers",
            "ncclUnhandledCudaError": "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"}[code]


def nccl_interpret(code: str) -> str:
    return {"ncclSystemError": "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
            "ncclRemoteError": "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
            "ncclInternalError": "ncclInternalError: Internal check failed.",
            "ncclUnhandledCudaError": "ncclUnhandledCudaError: Call to CUDA function failed."}[code]


def dist_backend_error(tf: TorchFlavour, code: str, nccl_ver: str, last: str, where: str = "ProcessGroupNCCL.cpp") -> list[str]:
    line = {"ProcessGroupNCCL.cpp": {(2, 1): 1331, (2, 3): 1970, (2, 4): 2027, (2, 5): 2100, (2, 7): 3356},
            "NCCLUtils.hpp": {(2, 1): 219, (2, 3): 275, (2, 4): 317, (2, 5): 317, (2, 7): 268}}[where][tf.ver]
    exc = "torch.distributed.DistBackendError" if tf.ver >= (2, 1) else "RuntimeError"
    return ["%s: NCCL error in: ../torch/csrc/distributed/c10d/%s:%d, %s, NCCL version %s" % (
        exc, where, line, nccl_err_str(code), nccl_ver),
            nccl_interpret(code), "Last error:", last]


# --------------------------------------------------------------------------- tracebacks
class Frame:
    __slots__ = ("path", "line", "func", "code")

    def __init__(self, path, line, func, code):
        self.path, self.line, self.func, self.code = path, line, func, code


def traceback_lines(frames: list[Frame], exc: list[str], py311: bool = False) -> list[tuple[str, str]]:
    """Render a Python traceback.  Tags: 'frame' for frame/code lines, 'head', 'exc'
    for the exception's first line and 'more' for following message lines."""
    out = [("Traceback (most recent call last):", "head")]
    for f in frames:
        out.append(('  File "%s", line %d, in %s' % (f.path, f.line, f.func), "frame"))
        if f.code:
            out.append(("    " + f.code, "frame"))
            if py311 and f.code.endswith(")") and "(" in f.code and len(f.code) < 90:
                lead = len(f.code) - len(f.code.lstrip())
                start = f.code.find("(") if "=" not in f.code.split("(")[0] else f.code.find("=") + 2
                start = max(start, 0)
                if f.code.find("=") != -1 and f.code.find("=") < f.code.find("("):
                    pass
                width = len(f.code) - start
                if 6 < width < 80:
                    out.append(("    " + " " * start + "^" * width, "frame"))
    for i, e in enumerate(exc):
        out.append((e, "exc" if i == 0 else "more"))
    return out


def chained(first: list[tuple[str, str]], second: list[tuple[str, str]], direct: bool = True) -> list[tuple[str, str]]:
    mid = ("The above exception was the direct cause of the following exception:" if direct
           else "During handling of the above exception, another exception occurred:")
    return first + [("", "frame"), (mid, "frame"), ("", "frame")] + second


# --------------------------------------------------------------------------- torch elastic (torchrun)
def elastic_prefix(tf: TorchFlavour, sev: str, t: float, mod: str, line: int, tid: int) -> str:
    if tf.ver >= (2, 4):
        path = ("site-packages/" if tf.ver >= (2, 5) else "") + mod.replace(".", "/") + ".py"
        return "%s%s %d %s:%d] " % (sev, ts_glog_py(t), tid, path, line)
    lvl = {"W": "WARNING", "E": "ERROR", "I": "INFO"}[sev]
    if tf.ver >= (2, 2):
        return "[%s] %s: [%s] " % (ts_logging(t), mod, lvl)
    return "%s:%s:" % (lvl, mod)


def torchrun_omp_banner(tf: TorchFlavour, t: float, tid: int) -> list[str]:
    p = elastic_prefix(tf, "W", t, "torch.distributed.run", {(2, 1): 757, (2, 3): 757, (2, 4): 757, (2, 5): 793, (2, 7): 766}[tf.ver], tid)
    if tf.ver < (2, 2):
        return ["WARNING:torch.distributed.run:", "*****************************************",
                "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
                "*****************************************"]
    return [p, p + "*****************************************",
            p + "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
            p + "*****************************************"]


def torchrun_failure(tf: TorchFlavour, rng, t: float, tid: int, host: str, script: str, failures: list[tuple[int, int, int, int]],
                     sigterm_pids: list[int], python: str, libdir: str) -> list[tuple[str, str]]:
    """torchrun's agent output when workers fail.  failures: (rank, local_rank, exitcode, pid)
    with the root cause first.  Returns (text, kind)."""
    out = []
    r0, l0, ec0, pid0 = failures[0]
    for p in sigterm_pids:
        out.append((elastic_prefix(tf, "W", t, "torch.distributed.elastic.multiprocessing.api", 897, tid)
                    + "Sending process %d closing signal SIGTERM" % p, "torchrun_sigterm"))
        t += 0.001
    out.append((elastic_prefix(tf, "E", t + 0.2, "torch.distributed.elastic.multiprocessing.api", 869, tid)
                + "failed (exitcode: %d) local_rank: %d (pid: %d) of binary: %s" % (ec0, l0, pid0, python), "torchrun_failed"))
    tb = [
        Frame("/usr/local/bin/torchrun", 8, "<module>", "sys.exit(main())"),
        Frame(libdir + "/torch/distributed/elastic/multiprocessing/errors/__init__.py", 355, "wrapper", "return f(*args, **kwargs)"),
        Frame(libdir + "/torch/distributed/run.py", 919, "main", "run(args)"),
        Frame(libdir + "/torch/distributed/run.py", 910, "run", "elastic_launch("),
        Frame(libdir + "/torch/distributed/launcher/api.py", 138, "__call__", "return launch_agent(self._config, self._entrypoint, list(args))"),
        Frame(libdir + "/torch/distributed/launcher/api.py", 269, "launch_agent", "raise ChildFailedError("),
    ]
    for txt, _ in traceback_lines(tb, ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "]):
        out.append((txt, "torchrun_childfailed" if txt.startswith("torch.distributed") else "torchrun_childfailed:context"))
    sep = "=" * 60
    out.append((sep, "torchrun_childfailed:context"))
    out.append(("%s FAILED" % script, "torchrun_childfailed"))
    out.append(("-" * 60, "torchrun_childfailed:context"))
    out.append(("Failures:", "torchrun_childfailed:context"))
    when = dt(t).strftime("%Y-%m-%d_%H:%M:%S")

    def entry(k, r, l, ec, pid):
        res = [("[%d]:" % k, "torchrun_childfailed:context"),
               ("  time      : %s" % when, "torchrun_childfailed:context"),
               ("  host      : %s" % host, "torchrun_childfailed:context"),
               ("  rank      : %d (local_rank: %d)" % (r, l), "torchrun_childfailed"),
               ("  exitcode  : %d (pid: %d)" % (ec, pid), "torchrun_childfailed"),
               ("  error_file: <N/A>", "torchrun_childfailed:context")]
        if ec < 0:
            sig = {-6: "SIGABRT", -9: "SIGKILL", -15: "SIGTERM", -11: "SIGSEGV", -7: "SIGBUS"}.get(ec, "SIGABRT")
            res.append(("  traceback : Signal %d (%s) received by PID %d" % (-ec, sig, pid), "torchrun_childfailed"))
        else:
            res.append(("  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html", "torchrun_childfailed:context"))
        return res

    others = [f for f in failures[1:] if f[2] != -15]
    if not others:
        out.append(("  <NO_OTHER_FAILURES>", "torchrun_childfailed:context"))
    else:
        for k, (r, l, ec, pid) in enumerate(others, 1):
            out += entry(k, r, l, ec, pid)
    out.append(("-" * 60, "torchrun_childfailed:context"))
    out.append(("Root Cause (first observed failure):", "torchrun_childfailed:context"))
    out += entry(0, r0, l0, ec0, pid0)
    out.append((sep, "torchrun_childfailed:context"))
    return out


# --------------------------------------------------------------------------- slurm
def slurmstepd_cancel(job_id: int, step: str, host: str, t: float, reason: str | None) -> str:
    ent = "STEP %d.%s" % (job_id, step) if step != "batch" else "JOB %d" % job_id
    tail = {None: "", "TIME LIMIT": " DUE TO TIME LIMIT", "PREEMPTION": " DUE TO PREEMPTION",
            "NODE FAILURE": " DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS",
            "TASK FAILURE": " DUE TO TASK FAILURE"}[reason]
    return "slurmstepd: error: *** %s ON %s CANCELLED AT %s%s ***" % (ent, host, ts_slurm(t), tail)


def task_range(ids: list[int]) -> str:
    ids = sorted(ids)
    parts, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else "%d-%d" % (ids[i], ids[j]))
        i = j + 1
    return ",".join(parts)


def srun_task_msg(host: str, ids: list[int], what: str) -> str:
    word = "task" if len(ids) == 1 else "tasks"
    return "srun: error: %s: %s %s: %s" % (host, word, task_range(ids), what)


# --------------------------------------------------------------------------- misc
def human_params(n: float) -> str:
    for unit, div in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return "%.1f %s" % (n / div, unit)
    return str(int(n))


def gib(x: float) -> str:
    if x >= 1:
        return "%.2f GiB" % x
    return "%.2f MiB" % (x * 1024)
