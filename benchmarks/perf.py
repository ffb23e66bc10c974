"""Performance of l4: parse throughput, end-to-end diagnosis time and memory, grouping agreement.

Usage::

    python benchmarks/perf.py [--sizes 64x3MB,64x12MB] [--big] [--sample 200000]
                              [--work DIR] [--keep] [--json OUT] [--seed N]
                              [--framework megatron] [--baselines 0]
                              [--loghub DIR | --no-loghub] [--loghub-datasets HDFS,Spark]
                              [--generator auto|simulate|synthetic]
    python benchmarks/perf.py --user-path [--sizes 8x2MB] [--baselines 1]

A failed job's logs run to many gigabytes, and plain drain3 (every line masked and fed to the
miner one by one) handles a few thousand long lines per second, so diagnosis is only
interactive if the fast path (``l4.scan``: digit-collapse, group, mask once per distinct
shape) is much faster *and still groups lines the way drain3 does*.  This script measures
both claims in one run and prints plain tables (``--json`` writes every figure too):

1. Parse throughput, on long training-log lines from a simulated job: plain drain3 and the
   fast path on the same sample (lines/s and ratio), the fast path on the largest whole node
   file (one core), and the whole job through ``l4.engine.scan_files`` with 1 and 2 workers.
   "Parse" means raw line -> drain3 template id on both paths (the fast path's time includes
   feeding its distinct shapes to drain3).  Files are read from a warm page cache.
2. Grouping agreement between the two paths on that sample: the fraction of lines whose
   group (the set of lines given the same template) is the same on both paths.
3. End to end: ``l4 diagnose JOB --no-prefect --no-kb --format json`` as a subprocess per job
   size; wall time, lines/s and the peak memory of the whole process tree (the engine scans
   in a process pool), and how time and memory grow with the number of lines.
4. Loghub-2k: for every dataset, the Content field (``loghub_formats``) parsed by both paths;
   grouping accuracy of each against the Loghub ground truth and their mutual agreement.

Sizes are ``NODESxBYTES`` (bytes per node: ``3MB``, ``40MB``, ``200KB``); the default sizes
take about three minutes.  ``--big`` adds a 256-node x 40 MB job (about 9 GB on disk, since the
failed job stops at its failure; a minute or two to generate, a few to diagnose): never in
CI.  Jobs come from :func:`l4.sim.simulate.simulate_case` (``bytes_per_node`` grows its training
phase); ``--generator synthetic`` (or an older simulator) uses a simple built-in generator of
realistic training-log lines instead.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
for _p in (ROOT, HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from drain3 import TemplateMiner  # noqa: E402
from loghub_formats import LOG_FORMATS, log_format  # noqa: E402

from l4.ingest import JobError, NodeFile, discover  # noqa: E402
from l4.mask import is_continuation, mask_line  # noqa: E402
from l4.merge import merge_scans  # noqa: E402
from l4.parse import plain_drain3_templates  # noqa: E402
from l4.scan import scan_node_file  # noqa: E402
from l4.templates import TemplateStore, miner_config  # noqa: E402

DEFAULT_SIZES = "64x3MB,64x12MB"
BIG_SIZE = "256x40MB"
DEFAULT_LOGHUB = ROOT.parent / "shared" / "data" / "loghub-2k"
#: nodes whose head and tail make up the plain-vs-fast sample
SAMPLE_NODES = 8
POLL_S = 0.1
TARGETS = {
    "speedup_vs_plain": 50.0,
    "fast_lines_per_s": 1_000_000.0,
    "big_wall_s": 90.0,
    "peak_rss_mb": 2048.0,
    "agreement": 0.99,
    "loghub_ga_mean": 0.85,
}


# ==========================================================================================
# How much of the machine is ours right now
# ==========================================================================================


def _spin(_: int) -> float:
    t0 = time.perf_counter()
    x = 0
    for i in range(5_000_000):
        x += i
    return time.perf_counter() - t0


def parallel_capacity() -> dict:
    """Speed-up of 2 processes over 1 on a pure-CPU loop, and the load average.

    On a shared 2-core machine other work takes cores away; a scan with 2 workers can only
    beat 1 worker when this figure is well above 1, so it is printed beside every result.
    """
    import multiprocessing as mp

    one = _spin(0)
    with mp.get_context("fork").Pool(2) as pool:
        two = pool.map(_spin, [0, 1])
    return {"one_s": one, "two_s": max(two), "speedup_2proc": 2 * one / max(two),
            "load": os.getloadavg()[0]}


# ==========================================================================================
# Sizes and job generation
# ==========================================================================================


@dataclass(frozen=True)
class Size:
    """One job size: how many node files and roughly how many bytes each."""

    n_nodes: int
    bytes_per_node: int

    @property
    def label(self) -> str:
        return f"{self.n_nodes}x{_human(self.bytes_per_node, unit=False)}"


_UNITS = {"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}


def parse_size(text: str) -> Size:
    """``64x12MB`` -> Size(64, 12 MiB); a clear error for anything else."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+(?:\.\d+)?)\s*([KMG]?B?)\s*", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError(
            f"bad size {text!r}: expected NODESxBYTES such as 64x12MB or 4x200KB"
        )
    n = int(m.group(1))
    per = int(float(m.group(2)) * _UNITS[m.group(3).upper()])
    if n < 2:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: a job needs at least 2 nodes")
    if per < 10_000:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: at least 10KB per node")
    return Size(n, per)


def parse_sizes(text: str) -> list[Size]:
    return [parse_size(t) for t in text.split(",") if t.strip()]


@dataclass
class Job:
    """A generated case: the failed job, its baselines and what the generator knows."""

    root: Path
    failed: Path
    baselines: list[Path]
    faulty_nodes: list[str]
    generator: str
    gen_s: float
    files: int = 0
    bytes: int = 0
    lines: int = 0
    base_bytes: int = 0
    base_lines: int = 0


def generate_job(out: Path, size: Size, *, seed: int, framework: str | None,
                 n_baselines: int, generator: str = "auto",
                 progress_who: str | None = None) -> Job:
    """Write a case under ``out`` with the simulator (or the synthetic fallback).
    ``progress_who="l0"``: local rank 0 of every node prints the iteration line (else the
    seed's dialect decides, often one rank of the whole job)."""
    t0 = time.perf_counter()
    truth = None
    used = generator
    if generator in ("auto", "simulate"):
        try:
            from l4.sim.simulate import simulate_case

            dialect = None
            if progress_who:
                from l4.sim.dialect import Dialect

                dialect = Dialect(progress_who=progress_who)
            truth = simulate_case(out, seed, framework=framework, n_nodes=size.n_nodes,
                                  bytes_per_node=size.bytes_per_node,
                                  n_baselines=n_baselines, gzip_some=False, dialect=dialect)
            used = "simulate"
        except (ImportError, TypeError) as exc:
            if generator == "simulate":
                raise SystemExit(f"error: l4.sim.simulate cannot make sized jobs ({exc})") from None
            shutil.rmtree(out, ignore_errors=True)
    if truth is None:
        truth = synthetic_case(out, seed, size, n_baselines)
        used = "synthetic"
    job = Job(root=out, failed=out / "failed",
              baselines=[out / b for b in truth.get("baselines", [])],
              faulty_nodes=list(truth.get("faulty_nodes", [])), generator=used,
              gen_s=time.perf_counter() - t0)
    return _counted(job)


def _counted(job: Job) -> Job:
    """``job`` with the files, bytes and lines of its failed run and baselines counted."""
    job.files, job.bytes, job.lines = count_job(job.failed)
    for b in job.baselines:
        _, nb, nl = count_job(b)
        job.base_bytes += nb
        job.base_lines += nl
    return job


def existing_job(out: Path) -> Job:
    """A case generated before (``--reuse``): its truth and sizes, counted again."""
    truth = json.loads((out / "truth.json").read_text())
    job = Job(root=out, failed=out / "failed",
              baselines=[out / b for b in truth.get("baselines", [])],
              faulty_nodes=list(truth.get("faulty_nodes", [])), generator="reused", gen_s=0.0)
    return _counted(job)


def count_job(job_dir: Path) -> tuple[int, int, int]:
    """(files, bytes, lines) of a job's node files, counted independently of l4."""
    files = discover(job_dir).files
    n_bytes = n_lines = 0
    for nf in files:
        with open(nf.path, "rb") as fh:
            last = b"\n"
            while chunk := fh.read(16 << 20):
                n_bytes += len(chunk)
                n_lines += chunk.count(b"\n")
                last = chunk[-1:]
            n_lines += last != b"\n"
    return len(files), n_bytes, n_lines


# -- synthetic fallback ----------------------------------------------------------------------

_NCCL = ("{host}:{pid}:{tid} [{gpu}] NCCL INFO Channel {ch:02d}/0 : {a}[{gpu}] -> {b}[{gpu}] "
         "[receive] via NET/IB/{nic}/GDRDMA")
_NCCL_INIT = ("{host}:{pid}:{tid} [{gpu}] NCCL INFO comm 0x{comm:x} rank {rank} nranks {world} "
              "cudaDev {gpu} nvmlDev {gpu} busId {bus:x}000 commId 0x{cid:x} - Init COMPLETE")
_MEGATRON = (" [{ts}] iteration {it:8d}/ {total:8d} | consumed samples: {cs:12d} | elapsed time "
             "per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tf:.1f} | "
             "learning rate: {lr:.6E} | global batch size: {gbs:5d} | lm loss: {loss:.6E} | "
             "loss scale: 1.0 | grad norm: {gn:.3f} | number of skipped iterations: 0 |")
_TIMERS = ("time (ms) | forward-compute: {f:.2f} | backward-compute: {b:.2f} | "
           "backward-params-all-reduce: {r:.2f} | optimizer: {o:.2f}")
_DS_STEP = ("[{ts},{msec:03d}] [INFO] [logging.py:96:log_dist] [Rank {rank}] step={step}, "
            "skipped=0, lr=[{lr:.8f}], mom=[(0.9, 0.95)]")


def synthetic_case(out: Path, seed: int, size: Size, n_baselines: int) -> dict:
    """A failed job (and healthy baselines) of repetitive long training-log lines.

    Only used when the simulator cannot size its jobs: the lines are realistic (Megatron
    iteration and timer lines, NCCL INFO lines, DeepSpeed steps, ``N: `` rank prefixes,
    timestamps, numbers that change on every line) but there is a single simple fault, an
    Xid 79 on one node followed by NCCL timeouts on the others.
    """
    rng = random.Random(seed)
    culprit = rng.randrange(size.n_nodes)
    names = [f"node-{i:03d}" for i in range(size.n_nodes)]
    _synthetic_job(out / "failed", names, size.bytes_per_node, rng, culprit=culprit)
    bases = []
    for j in range(n_baselines):
        _synthetic_job(out / f"baseline-{j}", names, size.bytes_per_node, rng, culprit=None)
        bases.append(f"baseline-{j}")
    return {"faulty_nodes": [names[culprit]], "baselines": bases}


def _synthetic_job(job: Path, names: list[str], per_node: int, rng: random.Random,
                   culprit: int | None) -> None:
    logs = job / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    status = "failed" if culprit is not None else "succeeded"
    (job / "job.json").write_text(json.dumps(
        {"job_id": job.name, "config_id": "synthetic-perf", "status": status,
         "framework": "megatron"}) + "\n")
    rpn, world = 8, 8 * len(names)
    t0 = 1_700_000_000.0
    for i, host in enumerate(names):
        pid = rng.randint(1000, 99999)
        lines: list[str] = []
        for r in range(rpn):
            g = i * rpn + r
            lines.append(f"{r}: " + _NCCL_INIT.format(
                host=host, pid=pid + r, tid=pid + r + 200, gpu=r, comm=rng.getrandbits(44),
                rank=g, world=world, bus=rng.randint(16, 250), cid=rng.getrandbits(60)))
        size, it = 0, 0
        fail_at = None
        with open(logs / f"{host}.log", "w") as fh:
            while size < per_node:
                it += 1
                ts = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0 + it * 1.3))
                for r in range(rpn):
                    lines.append(f"{r}: " + _TIMERS.format(
                        f=rng.uniform(320, 360), b=rng.uniform(620, 680),
                        r=rng.uniform(250, 320), o=rng.uniform(15, 40)))
                if i == len(names) - 1:
                    lines.append(f"{rpn - 1}: " + _MEGATRON.format(
                        ts=ts, it=it, total=500000, cs=it * 256, ms=rng.uniform(1250, 1350),
                        tf=rng.uniform(175, 190), lr=3e-4, gbs=256, loss=rng.uniform(1.5, 2.5),
                        gn=rng.uniform(0.5, 1.5)))
                if i == 0:
                    lines.append("0: " + _DS_STEP.format(
                        ts=ts, msec=rng.randrange(1000), rank=0, step=it, lr=3e-4))
                if rng.random() < 0.05:
                    r = rng.randrange(rpn)
                    lines.append(f"{r}: " + _NCCL.format(
                        host=host, pid=pid + r, tid=pid + r + 300, gpu=r, ch=rng.randrange(32),
                        a=rng.randrange(world), b=rng.randrange(world), nic=rng.randrange(8)))
                if len(lines) >= 2000:
                    text = "\n".join(lines) + "\n"
                    fh.write(text)
                    size += len(text)
                    lines.clear()
                if culprit is not None and fail_at is None and size >= 0.9 * per_node:
                    fail_at = it
                if fail_at is not None and it > fail_at:
                    break
            if culprit is not None:
                ts = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0 + it * 1.3))
                if i == culprit:
                    lines.append(f"[{ts}] NVRM: Xid (PCI:0000:3b:00): 79, pid={pid}, "
                                 "GPU has fallen off the bus.")
                else:
                    lines.append(f"0: [E ProcessGroupNCCL.cpp:1316] [Rank {i * rpn}] Watchdog "
                                 f"caught collective operation timeout: WorkNCCL(SeqNum={it}, "
                                 "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.")
            fh.write("\n".join(lines) + ("\n" if lines else ""))
            lines.clear()


# ==========================================================================================
# Grouping: the two parser paths and the Loghub metric
# ==========================================================================================


def grouping_accuracy(truth: Sequence, pred: Sequence) -> float:
    """Loghub's grouping accuracy: a line counts when the lines sharing its predicted group
    are exactly the lines sharing its true group.  Symmetric, so it is also the agreement of
    two parsers (the fraction of lines whose groups coincide)."""
    if len(truth) != len(pred):
        raise ValueError(f"cannot compare groupings of {len(truth)} and {len(pred)} lines")
    if not truth:
        return 1.0
    pairs = Counter(zip(truth, pred, strict=True))
    t_size = Counter(truth)
    p_size = Counter(pred)
    good = sum(n for (t, p), n in pairs.items() if t_size[t] == n and p_size[p] == n)
    return good / len(truth)


def read_lines(path: Path) -> list[str]:
    """Physical lines of a file, split on ``\\n`` only (as the scanner splits them)."""
    data = path.read_bytes()
    if data.endswith(b"\n"):
        data = data[:-1]
    return data.decode("utf-8", errors="replace").split("\n") if data else []


def is_record(line: str) -> bool:
    """Lines both paths group: not blank and not a traceback continuation."""
    return bool(line.strip()) and not is_continuation(line)


@dataclass
class Parsed:
    """Template ids of the record lines of one input, and what it cost."""

    ids: np.ndarray
    seconds: float
    cpu_s: float
    n_lines: int
    n_records: int
    n_groups: int
    extra: dict = field(default_factory=dict)


def fast_parse(path: Path, *, bare: bool = False) -> Parsed:
    """The fast path: scan (shapes + per-record shape index), then drain3 once per distinct
    shape.  ``bare`` feeds the shapes to a bare ``TemplateMiner`` instead of l4's
    ``TemplateStore``, to show what the store's own overhead costs."""
    c0 = time.process_time()
    t0 = time.perf_counter()
    scan = scan_node_file(NodeFile("sample", path, path.name))
    t1 = time.perf_counter()
    if bare:
        miner = TemplateMiner(None, config=miner_config())
        cids = [miner.add_log_message(s)["cluster_id"] for s in scan.shapes]
    else:
        store = TemplateStore(None)
        cids = [store.add(s) for s in scan.shapes]
    cols = np.array(cids, dtype=np.int64)
    ids = cols[scan.seq.astype(np.int64)] if scan.seq.size else np.zeros(0, np.int64)
    t2 = time.perf_counter()
    return Parsed(ids=ids, seconds=t2 - t0, cpu_s=time.process_time() - c0,
                  n_lines=scan.n_lines, n_records=scan.n_records,
                  n_groups=len(set(cids)),
                  extra={"scan_s": t1 - t0, "drain3_s": t2 - t1, "shapes": len(scan.shapes)})


def plain_parse(path: Path) -> Parsed:
    """The reference: every record line through ``l4.parse.plain_drain3_templates``."""
    c0 = time.process_time()
    t0 = time.perf_counter()
    lines = read_lines(path)
    records = [ln for ln in lines if is_record(ln)]
    ids = plain_drain3_templates(records)
    dt = time.perf_counter() - t0
    return Parsed(ids=np.asarray(ids, np.int64), seconds=dt, cpu_s=time.process_time() - c0,
                  n_lines=len(lines),
                  n_records=len(records), n_groups=len(set(ids)))


def bare_drain3_parse(path: Path) -> Parsed:
    """Plain drain3 as people run it: ``mask_line`` then a bare ``TemplateMiner`` (no
    persistence handler), line by line; the masking and drain3 times are kept apart."""
    c0 = time.process_time()
    t0 = time.perf_counter()
    lines = read_lines(path)
    records = [ln for ln in lines if is_record(ln)]
    masked = [mask_line(ln) for ln in records]
    t1 = time.perf_counter()
    miner = TemplateMiner(None, config=miner_config())
    ids = [miner.add_log_message(m)["cluster_id"] for m in masked]
    t2 = time.perf_counter()
    return Parsed(ids=np.asarray(ids, np.int64), seconds=t2 - t0,
                  cpu_s=time.process_time() - c0, n_lines=len(lines),
                  n_records=len(records), n_groups=len(set(ids)),
                  extra={"read_mask_s": t1 - t0, "drain3_s": t2 - t1})


# ==========================================================================================
# 1-2. Parse throughput and agreement on generated logs
# ==========================================================================================


def _rate(p: Parsed, n: int) -> dict:
    return {"s": p.seconds, "lines_per_s": n / p.seconds, "cpu_s": p.cpu_s,
            "lines_per_cpu_s": n / p.cpu_s if p.cpu_s > 0 else None, "groups": p.n_groups}


def build_sample(job: Job, n_lines: int, out: Path) -> Path:
    """Head and tail of a few node files (the faulty ones first) so the sample has startup,
    training and failure lines; written to ``out`` so both paths read the same bytes."""
    files = sorted(discover(job.failed).files, key=lambda nf: nf.rel)
    faulty = [nf for nf in files if nf.node in job.faulty_nodes][:2]
    step = max(1, len(files) // SAMPLE_NODES)
    chosen = faulty + [nf for nf in files[::step] if nf not in faulty]
    chosen = chosen[:SAMPLE_NODES]
    per = max(1, n_lines // (2 * len(chosen)))
    parts: list[str] = []
    for nf in chosen:
        lines = read_lines(nf.path)
        if len(lines) <= 2 * per:
            parts.extend(lines)
        else:
            parts.extend(lines[:per])
            parts.extend(lines[-per:])
    # every node prefix stays as written: both paths strip prefixes the same way
    out.write_text("\n".join(parts[:n_lines]) + "\n", encoding="utf-8")
    return out


def parse_throughput(job: Job, sample_lines: int, work: Path, *, whole_job_workers=(1, 2)) -> dict:
    """Section 1 and 2: both paths on one sample, the fast path on a file and a whole job."""
    res: dict = {}
    sample = build_sample(job, sample_lines, work / "sample.log")
    fast_parse(sample)  # warm-up: imports, compiled regexes
    fast = fast_parse(sample)
    fast_bare = fast_parse(sample, bare=True)
    plain = plain_parse(sample)
    bare = bare_drain3_parse(sample)
    if not (len(fast.ids) == len(plain.ids) == len(bare.ids)):
        raise RuntimeError(
            f"the paths saw different record lines: fast {len(fast.ids)}, plain "
            f"{len(plain.ids)}, bare {len(bare.ids)} (blank/continuation rules disagree)"
        )
    n = fast.n_lines
    res["sample"] = {
        "file": str(sample), "lines": n, "records": fast.n_records,
        "bytes": sample.stat().st_size,
        "fast": {**_rate(fast, n), **fast.extra},
        "fast_bare": {**_rate(fast_bare, n), **fast_bare.extra},
        "plain_l4": _rate(plain, n),
        "plain_bare": {**_rate(bare, n), **bare.extra},
        "speedup_vs_plain_l4": plain.seconds / fast.seconds,
        "speedup_vs_plain_bare": bare.seconds / fast.seconds,
        "speedup_bare_vs_plain_bare": bare.seconds / fast_bare.seconds,
        # CPU seconds are less disturbed than wall time when other work shares the cores
        "cpu_speedup_vs_plain_bare": bare.cpu_s / fast.cpu_s if fast.cpu_s > 0 else None,
        "cpu_speedup_vs_plain_l4": plain.cpu_s / fast.cpu_s if fast.cpu_s > 0 else None,
        "agreement_fast_plain_l4": grouping_accuracy(plain.ids.tolist(), fast.ids.tolist()),
        "agreement_fast_plain_bare": grouping_accuracy(bare.ids.tolist(), fast.ids.tolist()),
        "agreement_plain_l4_bare": grouping_accuracy(plain.ids.tolist(), bare.ids.tolist()),
        "agreement_fast_bare_plain_bare": grouping_accuracy(bare.ids.tolist(),
                                                            fast_bare.ids.tolist()),
    }
    # the largest node file, whole, on one core
    files = discover(job.failed).files
    big = max(files, key=lambda nf: nf.path.stat().st_size)
    runs = [fast_parse(big.path) for _ in range(3)]
    best = min(runs, key=lambda p: p.seconds)
    size = big.path.stat().st_size
    res["file"] = {"file": big.rel, "bytes": size, "lines": best.n_lines,
                   "s": best.seconds, "lines_per_s": best.n_lines / best.seconds,
                   "cpu_s": best.cpu_s,
                   "mb_per_s": size / best.seconds / 1e6, "shapes": best.extra["shapes"],
                   "groups": best.n_groups, "scan_s": best.extra["scan_s"]}
    # the whole failed job: scan (process pool) + merge through one store
    from l4.engine import scan_files  # imports scikit-learn: seconds, so only when needed

    spec = discover(job.failed)
    res["job"] = []
    for w in whole_job_workers:
        c0 = time.process_time()
        t0 = time.perf_counter()
        scans = scan_files(spec.files, workers=w)
        t1 = time.perf_counter()
        parsed = merge_scans(spec, scans, TemplateStore(None))
        t2 = time.perf_counter()
        res["job"].append({"workers": w, "lines": job.lines, "bytes": job.bytes,
                           "scan_s": t1 - t0, "merge_s": t2 - t1, "s": t2 - t0,
                           # worker processes' CPU is not ours to read: in-process runs only
                           "cpu_s": time.process_time() - c0 if w == 1 or job.bytes
                           < _parallel_min() else None,
                           "lines_per_s": job.lines / (t2 - t0),
                           "scan_lines_per_s": job.lines / (t1 - t0),
                           "in_process": w > 1 and job.bytes < _parallel_min(),
                           # one template text should be one event id on every node
                           "events": parsed.n_events,
                           "distinct_templates": len(set(parsed.templates))})
        del scans, parsed
    return res


def _parallel_min() -> int:
    from l4 import engine

    return int(getattr(engine, "PARALLEL_MIN_BYTES", 0))


# ==========================================================================================
# 3. End to end, with the memory of the whole process tree
# ==========================================================================================


class TreeMonitor(threading.Thread):
    """Samples the summed RSS (and PSS) of a process and all its descendants.

    ``getrusage(RUSAGE_CHILDREN)`` reports the largest single child, not what a pool of
    workers holds at once, so the tree is walked in /proc: its membership every half second
    (cheap enough not to steal a core from the job), each member's memory every 0.1 s.
    """

    def __init__(self, pid: int, interval: float = POLL_S, also=None):
        super().__init__(daemon=True)
        self.pid = pid
        self.also = also  # () -> more root pids whose trees count too (the warm process)
        self.interval = interval
        self.stop_event = threading.Event()
        self.peak_rss = 0
        self.peak_pss = 0
        self.hwm: dict[int, int] = {}
        self.max_procs = 0
        self.members: list[int] = [pid]
        self.cpu_ticks: dict[int, int] = {}  # last utime+stime seen per process
        self.cpu_base: dict[int, int] = {}  # ticks a process of ``also`` had already spent

    def run(self) -> None:
        last_tree = 0.0
        while not self.stop_event.is_set():
            now = time.monotonic()
            if now - last_tree >= 0.5:
                members = _descendants(self.pid)
                for root in (self.also() if self.also else ()):
                    for p in _descendants(root):
                        if p not in members:
                            members.append(p)
                            if p not in self.cpu_ticks and p not in self.cpu_base:
                                self.cpu_base[p] = _cpu_ticks(p) or 0  # before this run
                self.members = members
                last_tree = now
            rss = pss = 0
            for p in self.members:
                st = _status_kb(p)
                if st is None:
                    continue
                rss += st[0]
                self.hwm[p] = max(self.hwm.get(p, 0), st[1])
                pss += _pss_kb(p) or st[0]
                ticks = _cpu_ticks(p)
                if ticks is not None:
                    self.cpu_ticks[p] = max(self.cpu_ticks.get(p, 0), ticks)
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_pss = max(self.peak_pss, pss)
            self.max_procs = max(self.max_procs, len(self.members))
            self.stop_event.wait(self.interval)


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, ()))
    return out


def _status_kb(pid: int) -> tuple[int, int] | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            text = fh.read()
    except OSError:
        return None
    rss = hwm = 0
    for line in text.split(b"\n"):
        if line.startswith(b"VmRSS:"):
            rss = int(line.split()[1])
        elif line.startswith(b"VmHWM:"):
            hwm = int(line.split()[1])
    return rss, hwm


def _cpu_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _pss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def run_measured(cmd: list[str], env: dict[str, str], cwd: Path, out_file: Path,
                 also=None) -> dict:
    """Run ``cmd`` with stdout to ``out_file``; wall time and peak memory of its tree (and
    of the trees of the pids ``also()`` returns: l4's warm process does a command's work)."""
    with open(out_file, "wb") as out, open(str(out_file) + ".err", "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
        mon = TreeMonitor(proc.pid, also=also)
        mon.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        mon.stop_event.set()
        mon.join()
    tick = os.sysconf("SC_CLK_TCK")
    # wait4 gives the root's CPU plus that of the descendants it reaped (exact); pool workers
    # are reaped by the forkserver, which may outlive the root, so the last polled CPU of
    # every tree member is summed too and the larger of the two figures is kept
    root_cpu = usage.ru_utime + usage.ru_stime
    polled = sum(v - mon.cpu_base.get(p, 0) for p, v in mon.cpu_ticks.items()) / tick
    return {
        "rc": proc.returncode,
        "wall_s": wall,
        "peak_tree_rss_mb": mon.peak_rss / 1024,
        "peak_tree_pss_mb": mon.peak_pss / 1024,
        "sum_proc_hwm_mb": sum(mon.hwm.values()) / 1024,
        # ru_maxrss after wait4: the largest of the process and its reaped descendants
        "max_proc_rss_mb": max(usage.ru_maxrss, max(mon.hwm.values(), default=0)) / 1024,
        "max_procs": mon.max_procs,
        "cpu_s": max(root_cpu, polled),
        "stderr": Path(str(out_file) + ".err").read_text(errors="replace")[-2000:],
    }


def diagnose_cmd(job: Job) -> list[str]:
    cmd = [sys.executable, "-m", "l4.cli", "diagnose", str(job.failed)]
    for b in job.baselines:
        cmd += ["--baseline", str(b)]
    return cmd + ["--no-prefect", "--no-kb", "--format", "json"]


def bench_env(work: Path, tag: str) -> dict[str, str]:
    """A fresh template store and KB per run: the user's are never touched, and every
    size pays for learning its templates (the worst case)."""
    env = dict(os.environ)
    env.update({
        "L4_TEMPLATES": str(work / f"templates-{tag}.drain3"),
        "L4_KB": str(work / f"kb-{tag}.duckdb"),
        "L4_NO_PREFECT": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    })
    return env


def end_to_end(job: Job, size: Size, work: Path) -> dict:
    """``l4 diagnose`` on one job as a subprocess; figures plus the engine's own timing."""
    tag = size.label
    load = os.getloadavg()[0]
    m = run_measured(diagnose_cmd(job), bench_env(work, tag), ROOT, work / f"report-{tag}.json")
    lines = job.lines + job.base_lines
    n_bytes = job.bytes + job.base_bytes
    row = {"size": tag, "nodes": size.n_nodes, "files": job.files, "bytes": job.bytes,
           "lines": job.lines, "input_bytes": n_bytes, "input_lines": lines,
           "baselines": len(job.baselines), "generator": job.generator, "gen_s": job.gen_s,
           "load_before": load, **m}
    row["lines_per_s"] = lines / m["wall_s"]
    row["mb_per_s"] = n_bytes / m["wall_s"] / 1e6
    row["us_per_line"] = m["wall_s"] / max(lines, 1) * 1e6
    row["lines_per_cpu_s"] = lines / m["cpu_s"] if m["cpu_s"] > 0 else None
    report = None
    if m["rc"] == 0:
        try:
            report = json.loads((work / f"report-{tag}.json").read_text())
        except ValueError as exc:
            row["error"] = f"report is not JSON: {exc}"
    else:
        row["error"] = f"exit {m['rc']}: {m['stderr'][-400:]}"
    if report:
        timing = report.get("timing", {})
        row.update({k: timing.get(k) for k in ("scan_s", "merge_s", "analyze_s", "total_s")})
        if timing.get("scan_s"):
            row["scan_lines_per_s"] = lines / timing["scan_s"]
        top = [n["node"] for n in report.get("nodes", [])[:1]]
        row["top1_node"] = top[0] if top else None
        row["top1_ok"] = bool(top and top[0] in job.faulty_nodes) if job.faulty_nodes else None
    return row


def _user_env(work: Path, tag: str, client_home: Path) -> dict[str, str]:
    """A new user's environment: no PREFECT_API_URL, l4's local server under ``work``, and
    a Prefect client home of its own (a fresh one: no cached scans)."""
    env = {k: v for k, v in bench_env(work, tag).items() if not k.startswith("PREFECT_")}
    env.pop("L4_NO_PREFECT", None)
    env.update(L4_SERVER_DIR=str(work / "prefect-server"), L4_LOCAL_SERVER="1",
               PREFECT_HOME=str(client_home), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               L4_QUIET_PREFECT_HINT="1", L4_SPOOL=str(work / "spool"))
    return env


def _warm_pids(work: Path):
    """() -> the pid of l4's warm process under ``work`` (its tree counts as the command's)."""
    def pids() -> list[int]:
        raw = (work / "prefect-server" / "warm" / "pid")
        try:
            return [int(raw.read_text().strip())]
        except (OSError, ValueError):
            return []
    return pids


def _server_pid(work: Path) -> int | None:
    try:
        return int((work / "prefect-server" / "pid").read_text().strip())
    except (OSError, ValueError):
        return None


def _l4(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "l4.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, check=False)


def _median_row(how: str, tag: str, ms: list[dict], job: Job, outs: list[Path]) -> dict:
    ok = [m for m in ms if m["rc"] == 0]
    walls = [m["wall_s"] for m in ms]
    row = {"size": tag, "how": how, "runs": len(ms), "rc": max(m["rc"] for m in ms),
           "wall_s": float(np.median(walls)), "wall_min_s": min(walls), "wall_max_s": max(walls),
           "peak_tree_rss_mb": max(m["peak_tree_rss_mb"] for m in ms),
           "cpu_s": float(np.median([m["cpu_s"] for m in ms])),
           "stderr": ms[-1]["stderr"]}
    tops, server = [], "none"
    for m, out in zip(ms, outs, strict=True):
        if m["rc"] != 0:
            continue
        rep = json.loads(out.read_text())
        top = [n["node"] for n in rep.get("nodes", [])[:1]]
        tops.append(bool(top and top[0] in job.faulty_nodes))
        t = rep.get("timing", {})
        server = t.get("prefect_server", "none") + (" + warm" if t.get("warm_process") else "")
    row["server"] = server
    row["top1_ok"] = (all(tops) if tops else None) if job.faulty_nodes and ok else None
    return row


def user_paths(job: Job, size: Size, work: Path, repeats: int = 3, served: bool = True,
               kb_match: bool = True, big: bool = False) -> list[dict]:
    """The ways a user runs ``l4 diagnose`` on one job, side by side, root causes on (the
    knowledge base embeds its library in an untimed first run): ``--no-prefect``; the
    default command when no server runs yet (it starts l4's local server and the warm
    process); the default command with both up; the flow run in the command's own process
    (``L4_WARM=0``); and, with ``served``, ``l4 serve``: event to stored diagnosis.
    Steady states are the median of ``repeats`` runs.  Peak RSS is of the command's process
    tree plus l4's warm process (which does the command's work); a server already up is
    not counted, one the command starts is.

    ``big`` (a job of gigabytes): only ``--no-prefect`` and the default command with the
    server and warm process already up (started untimed), alternated, without the knowledge base (``--no-kb``:
    embedding the fault library in a fresh KB is not what is compared)."""
    base = [sys.executable, "-m", "l4.cli", "diagnose", str(job.failed)]
    for b in job.baselines:
        base += ["--baseline", str(b)]
    base += ["--format", "json", "--force"] + (["--no-kb"] if big else [])
    tag = size.label
    env_np = bench_env(work, tag)
    env_a = _user_env(work, tag, work / "client-a")
    env_b = _user_env(work, tag, work / "client-b")
    env_inproc = dict(env_b, L4_WARM="0")
    _l4(env_a, "server", "stop")
    if big:
        # a client home of its own, emptied: no scan cached by an earlier run of this job
        shutil.rmtree(work / "client-big", ignore_errors=True)
        return _big_user_paths(job, tag, work, base, env_np,
                               _user_env(work, tag, work / "client-big"), repeats)
    warm = subprocess.run(base + ["--no-prefect"], env=env_np, cwd=ROOT, capture_output=True,
                          check=False)  # embeds the fault library into this KB: untimed
    if warm.returncode != 0:
        print(f"[{tag}] warm-up failed: {warm.stderr.decode(errors='replace')[-300:]}")
    plan = [
        ("--no-prefect", base + ["--no-prefect"], env_np, repeats),
        ("default, no server yet (starts it and the warm process)", base, env_a, 1),
        ("default, server and warm process up", base, env_b, repeats),
        ("default, flow in the command's process (L4_WARM=0)", base, env_inproc, repeats),
    ]
    rows = []
    try:
        for i, (how, cmd, env, n) in enumerate(plan):
            ms, outs = [], []
            for k in range(n):
                out = work / f"user-{tag}-{i}-{k}.json"
                ms.append(run_measured(cmd, env, ROOT, out, also=_warm_pids(work)))
                outs.append(out)
            row = _median_row(how, tag, ms, job, outs)
            rows.append(row)
            print(f"[{tag}] {how}: median {row['wall_s']:.2f} s ({row['wall_min_s']:.2f}-"
                  f"{row['wall_max_s']:.2f}), tree RSS {row['peak_tree_rss_mb']:.0f} MB", flush=True)
        if served:
            rows.append(served_path(job, tag, work, env_b, repeats))
        if kb_match:
            rows.append(kb_match_row(job, tag, work, env_b, outs[-1], repeats))
    finally:
        _l4(env_a, "server", "stop")
    return rows


def _big_user_paths(job: Job, tag: str, work: Path, base: list[str], env_np: dict[str, str],
                    env_b: dict[str, str], repeats: int = 3) -> list[dict]:
    """``--no-prefect`` and the default command (server and warm process up, started
    untimed), alternated ``repeats`` times; the client home's scan cache is emptied before
    each default run, so that every run parses the whole job, as a new failure does."""
    client = Path(env_b["PREFECT_HOME"])
    plan = (("--no-prefect", base + ["--no-prefect"], env_np),
            ("default, server and warm process up", base, env_b))
    ms: list[list[dict]] = [[], []]
    outs: list[list[Path]] = [[], []]
    try:
        _l4(env_b, "server", "start")
        for k in range(repeats):
            for i, (how, cmd, env) in enumerate(plan):
                if i == 1:
                    shutil.rmtree(client / "storage", ignore_errors=True)
                out = work / f"user-{tag}-{i}-{k}.json"
                m = run_measured(cmd, env, ROOT, out, also=_warm_pids(work))
                ms[i].append(m)
                outs[i].append(out)
                print(f"[{tag}] {how} #{k + 1}: {m['wall_s']:.2f} s, tree RSS "
                      f"{m['peak_tree_rss_mb']:.0f} MB", flush=True)
    finally:
        _l4(env_b, "server", "stop")
    rows = []
    for i, (how, _cmd, _env) in enumerate(plan):
        row = _median_row(how, tag, ms[i], job, outs[i])
        scans = []
        for out in outs[i]:
            with contextlib.suppress(OSError, ValueError):
                scans.append(json.loads(out.read_text()).get("timing", {}).get("scan_s"))
        scans = [s for s in scans if s is not None]
        row["scan_s"] = statistics.median(scans) if scans else None
        rows.append(row)
    return rows


def served_path(job: Job, tag: str, work: Path, env: dict[str, str], repeats: int) -> dict:
    """``l4 serve`` against the local server: ``l4 emit failed`` of a fresh copy of the job
    (a new failure each time) until its diagnosis is in the knowledge base.  The first event
    (deployments registering, first flow run) is untimed; peak RSS is of ``l4 serve``'s tree
    (it runs every flow run as a child process)."""
    from l4.kbstore import list_diagnoses

    srv = _l4(env, "server", "start")
    url = next((w for w in (x.rstrip(",)") for x in srv.stdout.split()) if w.endswith("/api")),
               None)
    if srv.returncode != 0 or url is None:
        return {"size": tag, "how": "served: event -> stored diagnosis", "rc": 1,
                "wall_s": math.nan, "peak_tree_rss_mb": math.nan, "stderr": srv.stderr}
    senv = dict(env, PREFECT_API_URL=url)
    kb = Path(env["L4_KB"])
    log = open(work / f"serve-{tag}.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "l4.cli", "serve", "--poll", "1"], env=senv,
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    mon = TreeMonitor(proc.pid)
    times: list[float] = []
    rc = 0
    try:
        deadline = time.monotonic() + 180  # an event sent before the triggers exist is lost
        while b"being served" not in (work / f"serve-{tag}.log").read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("l4 serve did not come up: "
                                   + (work / f"serve-{tag}.log").read_text()[-500:])
            time.sleep(0.2)
        time.sleep(2.0)
        for k in range(repeats + 1):
            copy = work / f"served-{tag}-{k}"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(job.failed, copy)
            before = len(list_diagnoses(kb=kb))
            args = ["emit", "failed", str(copy)]
            for b in job.baselines:
                args += ["--baseline", str(b)]
            if k == 1:
                mon.start()
            t0 = time.perf_counter()
            res = _l4(senv, *args)
            deadline = t0 + (300 if k == 0 else 120)
            while len(list_diagnoses(kb=kb)) <= before and time.perf_counter() < deadline:
                time.sleep(0.1)
            dt = time.perf_counter() - t0
            if res.returncode != 0 or len(list_diagnoses(kb=kb)) <= before:
                rc = 1
                print(f"[{tag}] served run {k} failed: {res.stdout} {res.stderr[-300:]}")
                break
            if k:
                times.append(dt)
            print(f"[{tag}] served: event -> stored diagnosis {dt:.2f} s"
                  f"{' (first, untimed)' if k == 0 else ''}", flush=True)
    finally:
        mon.stop_event.set()
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)
        log.close()
    return {"size": tag, "how": "served: event -> stored diagnosis", "rc": rc,
            "runs": len(times), "server": "local (l4 serve)",
            "wall_s": float(np.median(times)) if times else math.nan,
            "wall_min_s": min(times, default=math.nan), "wall_max_s": max(times, default=math.nan),
            "peak_tree_rss_mb": mon.peak_rss / 1024, "top1_ok": None}


def kb_match_row(job: Job, tag: str, work: Path, env: dict[str, str], report: Path,
                 repeats: int) -> dict:
    """``l4 kb match`` on the diagnosis's event examples (templates the KB already embedded
    during the diagnoses above)."""
    try:
        rep = json.loads(report.read_text())
    except (OSError, ValueError):
        rep = {}
    lines = [ex["text"] for ev in rep.get("events", [])[:8] for ex in ev.get("examples", [])[:2]]
    text = work / f"kbmatch-{tag}.log"
    text.write_text("\n".join(lines or ["NCCL watchdog timeout"]) + "\n")
    cmd = [sys.executable, "-m", "l4.cli", "kb", "match", str(text), "--format", "json"]
    subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, check=False)  # embeds: untimed
    ms = [run_measured(cmd, env, ROOT, work / f"kbmatch-{tag}-{k}.json") for k in range(repeats)]
    walls = [m["wall_s"] for m in ms]
    return {"size": tag, "how": f"l4 kb match ({len(lines)} known lines)", "server": "none",
            "rc": max(m["rc"] for m in ms), "runs": len(ms), "wall_s": float(np.median(walls)),
            "wall_min_s": min(walls), "wall_max_s": max(walls),
            "peak_tree_rss_mb": max(m["peak_tree_rss_mb"] for m in ms), "top1_ok": None}


def series(work: Path, n_jobs: int, seed0: int, framework: str | None,
           generator: str) -> dict:
    """``n_jobs`` small failed jobs (8, 12 or 16 nodes, ~70 k lines, one baseline each),
    diagnosed one after the other with the default command, root causes on, starting with
    no server at all (the first run starts the local server and the warm process)."""
    jobs = []
    for k in range(n_jobs):
        nodes = (8, 12, 16)[k % 3]
        size = Size(n_nodes=nodes, bytes_per_node=(9 << 20) // nodes)
        jobs.append(generate_job(work / f"series-{k}", size, seed=seed0 + k,
                                 framework=framework, n_baselines=1, generator=generator))
    env = _user_env(work, "series", work / "client-series")
    _l4(env, "server", "stop")
    # the fault library is embedded into this fresh knowledge base once, untimed: an
    # installation does that once (``make demo``), it is not what a series of diagnoses costs
    probe = work / "series-probe.log"
    probe.write_text("NCCL watchdog thread terminated with exception\n")
    _l4(env, "kb", "match", str(probe), timeout=1800)
    rows = []
    try:
        for k, job in enumerate(jobs):
            cmd = [sys.executable, "-m", "l4.cli", "diagnose", str(job.failed), "--format", "json"]
            for b in job.baselines:
                cmd += ["--baseline", str(b)]
            out = work / f"series-{k}.json"
            m = run_measured(cmd, env, ROOT, out, also=_warm_pids(work))
            top_ok = None
            if m["rc"] == 0:
                rep = json.loads(out.read_text())
                top = [x["node"] for x in rep.get("nodes", [])[:1]]
                top_ok = bool(top and top[0] in job.faulty_nodes)
            rows.append({"job": k, "lines": job.lines, "nodes": job.files, "rc": m["rc"],
                         "wall_s": m["wall_s"], "rss_mb": m["peak_tree_rss_mb"], "top1_ok": top_ok})
            print(f"[series {k + 1}/{n_jobs}] {job.files} nodes, {job.lines:,} lines: "
                  f"{m['wall_s']:.2f} s", flush=True)
    finally:
        _l4(env, "server", "stop")
    walls = [r["wall_s"] for r in rows]
    return {"jobs": rows, "median_s": float(np.median(walls)), "max_s": max(walls),
            "first_s": walls[0], "median_lines": float(np.median([r["lines"] for r in rows])),
            "failed": sum(r["rc"] != 0 for r in rows),
            "top1_ok": sum(bool(r["top1_ok"]) for r in rows)}


def print_user_paths(rows: list[dict]) -> None:
    print(table("l4 diagnose as users run it (wall clock: median of the runs, min-max; peak RSS "
                "of the process tree incl. the warm process)",
                ["job", "how", "server", "runs", "wall s", "min-max s", "tree RSS MB",
                 "culprit first"],
                [[r["size"], r["how"], str(r.get("server", "-")), str(r.get("runs", 1)),
                  _fmt(r["wall_s"], ".2f"),
                  f"{_fmt(r.get('wall_min_s', r['wall_s']), '.2f')}-"
                  f"{_fmt(r.get('wall_max_s', r['wall_s']), '.2f')}",
                  _fmt(r["peak_tree_rss_mb"], ".0f"), str(r.get("top1_ok"))] for r in rows]))


def print_series(res: dict) -> None:
    print(table(f"A series of {len(res['jobs'])} small jobs, default l4 diagnose, starting with "
                "no server", ["median lines", "first run s", "median s", "max s",
                              "culprit first", "failed"],
                [[f"{res['median_lines']:,.0f}", _fmt(res["first_s"], ".2f"),
                  _fmt(res["median_s"], ".2f"), _fmt(res["max_s"], ".2f"),
                  f"{res['top1_ok']}/{len(res['jobs'])}", str(res["failed"])]]))


def cli_startup(work: Path) -> float:
    """Wall time of ``l4 --help``: the fixed cost every diagnosis pays (interpreter, imports)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "l4.cli", "--help"], env=bench_env(work, "help"),
                   cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def growth(rows: list[dict]) -> dict:
    """How time and memory grow with lines: pairwise exponents and a linear fit of time."""
    ok = [r for r in rows if r.get("rc") == 0 and r["input_lines"] > 0]
    steps = []
    for a, b in zip(ok, ok[1:], strict=False):
        lx = b["input_lines"] / a["input_lines"]
        tx = b["wall_s"] / a["wall_s"]
        mx = b["peak_tree_rss_mb"] / max(a["peak_tree_rss_mb"], 1e-9)
        sx = (b.get("scan_s") or math.nan) / (a.get("scan_s") or math.nan)
        steps.append({
            "from": a["size"], "to": b["size"], "lines_x": lx, "time_x": tx, "rss_x": mx,
            "scan_x": sx, "cpu_x": b["cpu_s"] / a["cpu_s"] if a["cpu_s"] else None,
            "time_exp": math.log(tx) / math.log(lx) if lx > 1 else None,
            "rss_exp": math.log(mx) / math.log(lx) if lx > 1 and mx > 0 else None,
            "marginal_us_per_line": (b["wall_s"] - a["wall_s"])
            / max(b["input_lines"] - a["input_lines"], 1) * 1e6,
        })
    fit = None
    if len(ok) >= 2:
        x = np.array([r["input_lines"] for r in ok], float)
        y = np.array([r["wall_s"] for r in ok], float)
        slope, icpt = np.polyfit(x, y, 1)
        fit = {"intercept_s": float(icpt), "us_per_line": float(slope) * 1e6,
               "lines_per_s": 1 / slope if slope > 0 else None}
    return {"steps": steps, "fit": fit}


# ==========================================================================================
# 4. Loghub
# ==========================================================================================


def loghub_datasets(base: Path, only: Sequence[str] | None) -> list[str]:
    names = sorted(d.name for d in base.iterdir()
                   if d.is_dir() and (d / f"{d.name}_2k.log").exists()) if base.is_dir() else []
    if only:
        missing = [d for d in only if d not in names]
        if missing:
            raise SystemExit(f"error: no Loghub-2k data for {', '.join(missing)} under {base}")
        names = [d for d in names if d in only]
    return names


def loghub_one(base: Path, dataset: str, work: Path) -> dict:
    """Both paths on one dataset's Content; accuracy against the truth and agreement."""
    fmt = log_format(dataset)
    raw = read_lines(base / dataset / f"{dataset}_2k.log")
    with open(base / dataset / f"{dataset}_2k.log_structured.csv", newline="",
              encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if len(rows) != len(raw):
        raise SystemExit(f"error: {dataset}: {len(raw)} log lines but {len(rows)} truth rows")
    contents, unmatched = [], 0
    for line in raw:
        c = fmt.content(line)
        if c is None:
            unmatched += 1
            c = line
        contents.append(c)
    same_as_truth = sum(c == r["Content"] for c, r in zip(contents, rows, strict=True))
    path = work / f"loghub-{dataset}.log"
    path.write_text("\n".join(contents) + "\n", encoding="utf-8")
    rec = [is_record(c) for c in contents]
    fast = fast_parse(path)
    plain = plain_parse(path)
    n_rec = sum(rec)
    row = {"dataset": dataset, "lines": len(raw), "records": n_rec,
           "excluded": len(raw) - n_rec, "format_unmatched": unmatched,
           "content_as_truth": same_as_truth / len(raw),
           "truth_groups": len(set(r["EventId"] for r in rows)),
           "plain_groups": plain.n_groups, "fast_groups": fast.n_groups}
    if len(fast.ids) != n_rec or len(plain.ids) != n_rec:
        row["error"] = (f"record lines differ: fast {len(fast.ids)}, plain {len(plain.ids)}, "
                        f"expected {n_rec}")
        return row
    truth = [r["EventId"] for r in rows]
    row["ga_plain"] = grouping_accuracy(truth, _spread(plain.ids, contents, rec))
    row["ga_fast"] = grouping_accuracy(truth, _spread(fast.ids, contents, rec))
    row["agreement"] = grouping_accuracy(plain.ids.tolist(), fast.ids.tolist())
    return row


def _spread(ids: np.ndarray, lines: list[str], rec: list[bool]) -> list[int]:
    """Template id for every line: records their own, a continuation line its record's (as
    ``l4 parse`` reports it), blank lines one group of their own."""
    out, it, last = [], iter(ids.tolist()), -1
    for line, r in zip(lines, rec, strict=True):
        if r:
            last = next(it)
            out.append(last)
        elif line.strip():
            out.append(last)
        else:
            out.append(-2)
    return out


# ==========================================================================================
# Printing
# ==========================================================================================


def _human(n: float, unit: bool = True) -> str:
    for suffix, k in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= k:
            v = n / k
            if not unit and v == int(v):
                return f"{int(v)}{suffix}"
            return f"{v:.0f}{suffix}" if v >= 100 else f"{v:.3g}{suffix}"
    return f"{int(n)}B"


def _fmt(v, spec: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float) and not math.isfinite(v):
        return "-"
    if spec == "int":
        return f"{int(round(v)):,}"
    if spec:
        return format(v, spec)
    return str(v)


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned table: first column left, the rest right."""
    cols = [list(header)] + [list(r) for r in rows]
    widths = [max(len(str(r[i])) for r in cols) for i in range(len(header))]
    def line(r):
        return "  ".join(str(c).ljust(widths[i]) if i == 0 else str(c).rjust(widths[i])
                         for i, c in enumerate(r)).rstrip()
    out = [title, line(header), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out) + "\n"


def print_parse(res: dict) -> None:
    s = res["sample"]
    def row(name: str, key: str, speedup: str) -> list[str]:
        r = s[key]
        return [name, _fmt(r["s"], ".2f"), _fmt(r["lines_per_s"], "int"), _fmt(r["cpu_s"], ".2f"),
                _fmt(r["lines_per_cpu_s"], "int"), r["groups"], speedup]

    print(table(
        f"Parse throughput on the same sample ({s['lines']:,} lines, {_human(s['bytes'])}, "
        f"{s['records']:,} records; raw line -> drain3 template id)",
        ["path", "wall s", "lines/s", "CPU s", "lines/CPU-s", "groups",
         "fast path (l4 store) speedup over it"],
        [row("fast path (scan + l4 TemplateStore per shape)", "fast", "1.0x"),
         row("fast path (scan + bare TemplateMiner per shape)", "fast_bare",
             f"{s['fast']['s'] / s['fast_bare']['s']:.1f}x"),
         row("plain drain3, l4 TemplateStore (plain_drain3_templates)", "plain_l4",
             f"{s['speedup_vs_plain_l4']:.1f}x"),
         row("plain drain3, bare TemplateMiner", "plain_bare",
             f"{s['speedup_vs_plain_bare']:.1f}x")]))
    print(f"  bare plain drain3 split: read+mask_line {s['plain_bare']['read_mask_s']:.2f} s, "
          f"drain3 add_log_message {s['plain_bare']['drain3_s']:.2f} s; fast path split: "
          f"scan {s['fast']['scan_s']:.3f} s, drain3 on {s['fast']['shapes']} shapes "
          f"{s['fast']['drain3_s']:.3f} s (l4 TemplateStore) / "
          f"{s['fast_bare']['drain3_s']:.3f} s (bare TemplateMiner)\n")
    print(f"  speedup of the fast path with a bare miner over bare plain drain3: "
          f"{s['speedup_bare_vs_plain_bare']:.1f}x; in CPU seconds, fast path over plain: "
          f"{_fmt(s['cpu_speedup_vs_plain_l4'], '.1f')}x (l4 store), "
          f"{_fmt(s['cpu_speedup_vs_plain_bare'], '.1f')}x (bare)\n")
    f = res["file"]
    rows = [[f"one node file {f['file']} ({_human(f['bytes'])}), 1 core", f"{f['lines']:,}",
             _fmt(f["s"], ".2f"), _fmt(f["lines_per_s"], "int"), _fmt(f["mb_per_s"], ".0f"),
             _fmt(f["lines"] / f["cpu_s"] if f["cpu_s"] else None, "int"), "-"]]
    for j in res["job"]:
        note = " (in-process: job below the pool threshold)" if j["in_process"] else ""
        rows.append([f"whole failed job, scan_files workers={j['workers']} + merge{note}",
                     f"{j['lines']:,}", _fmt(j["s"], ".2f"), _fmt(j["lines_per_s"], "int"),
                     _fmt(j["bytes"] / j["s"] / 1e6, ".0f"),
                     _fmt(j["lines"] / j["cpu_s"] if j.get("cpu_s") else None, "int"),
                     _fmt(j["scan_lines_per_s"], "int"),
                     _fmt(j["merge_s"], ".2f"), f"{j['events']}/{j['distinct_templates']}"])
    rows[0] += ["-", "-"]
    print(table("Fast path on whole files (best of 3 for the file; warm page cache)",
                ["input", "lines", "wall s", "lines/s", "MB/s", "lines/CPU-s",
                 "scan-only lines/s", "merge s", "event ids/templates"], rows))
    print(table("Grouping agreement on the sample (fraction of lines whose groups coincide)",
                ["pair", "agreement"],
                [["fast path vs plain drain3 (l4 TemplateStore)",
                  _fmt(s["agreement_fast_plain_l4"], ".4f")],
                 ["fast path vs plain drain3 (bare TemplateMiner)",
                  _fmt(s["agreement_fast_plain_bare"], ".4f")],
                 ["fast path (bare miner) vs plain drain3 (bare TemplateMiner)",
                  _fmt(s["agreement_fast_bare_plain_bare"], ".4f")],
                 ["plain (l4 TemplateStore) vs plain (bare)",
                  _fmt(s["agreement_plain_l4_bare"], ".4f")]]))


def print_e2e(rows: list[dict], grow: dict, startup: float) -> None:
    print(table(
        f"End to end: l4 diagnose --no-prefect --no-kb --format json (CLI start-up alone: "
        f"{startup:.2f} s)",
        ["size", "files", "input", "lines", "wall s", "lines/s", "MB/s", "us/line",
         "CPU s", "lines/CPU-s", "tree RSS MB", "tree PSS MB", "max proc MB", "procs", "scan s", "merge s",
         "analyze s", "top-1 ok", "load"],
        [[r["size"], r["files"], _human(r["input_bytes"]), f"{r['input_lines']:,}",
          _fmt(r["wall_s"], ".2f"), _fmt(r["lines_per_s"], "int"), _fmt(r["mb_per_s"], ".0f"),
          _fmt(r["us_per_line"], ".2f"), _fmt(r["cpu_s"], ".1f"),
          _fmt(r["lines_per_cpu_s"], "int"), _fmt(r["peak_tree_rss_mb"], ".0f"),
          _fmt(r["peak_tree_pss_mb"], ".0f"), _fmt(r["max_proc_rss_mb"], ".0f"),
          r["max_procs"], _fmt(r.get("scan_s"), ".2f"), _fmt(r.get("merge_s"), ".2f"),
          _fmt(r.get("analyze_s"), ".2f"), _fmt(r.get("top1_ok")),
          _fmt(r["load_before"], ".1f")] for r in rows]))
    for r in rows:
        if r.get("error"):
            print(f"  {r['size']}: FAILED {r['error']}")
    if grow["steps"]:
        print(table("Growth between sizes (exponent 1 = linear in lines, 0 = flat)",
                    ["step", "lines x", "wall x", "wall exponent", "scan x", "CPU x",
                     "marginal us/line", "RSS x", "RSS exponent"],
                    [[f"{s['from']} -> {s['to']}", _fmt(s["lines_x"], ".2f"),
                      _fmt(s["time_x"], ".2f"), _fmt(s["time_exp"], ".2f"),
                      _fmt(s["scan_x"], ".2f"), _fmt(s["cpu_x"], ".2f"),
                      _fmt(s["marginal_us_per_line"], ".2f"), _fmt(s["rss_x"], ".2f"),
                      _fmt(s["rss_exp"], ".2f")] for s in grow["steps"]]))
    if grow["fit"]:
        f = grow["fit"]
        print(f"  linear fit wall = a + b*lines: a = {f['intercept_s']:.2f} s, "
              f"b = {f['us_per_line']:.3f} us/line ({_fmt(f['lines_per_s'], 'int')} lines/s)\n")


def print_loghub(rows: list[dict]) -> None:
    body = []
    for r in rows:
        body.append([r["dataset"], r["lines"], r["excluded"], _fmt(r["content_as_truth"], ".3f"),
                     r["truth_groups"], r["plain_groups"], r["fast_groups"],
                     _fmt(r.get("ga_plain"), ".4f"), _fmt(r.get("ga_fast"), ".4f"),
                     _fmt(r.get("agreement"), ".4f"),
                     _fmt(None if "ga_fast" not in r else r["ga_fast"] >= r["ga_plain"])])
    ok = [r for r in rows if "agreement" in r]
    if ok:
        body.append(["mean", "", "", "", "", "", "",
                     _fmt(float(np.mean([r["ga_plain"] for r in ok])), ".4f"),
                     _fmt(float(np.mean([r["ga_fast"] for r in ok])), ".4f"),
                     _fmt(float(np.mean([r["agreement"] for r in ok])), ".4f"), ""])
    print(table("Loghub-2k: grouping accuracy vs ground truth (Content field) and fast-vs-plain "
                "agreement",
                ["dataset", "lines", "excluded", "content=csv", "truth groups",
                 "plain groups", "fast groups", "GA plain", "GA fast", "agreement",
                 "fast >= plain"], body))
    for r in rows:
        if r.get("error"):
            print(f"  {r['dataset']}: {r['error']}")


def check_targets(out: dict) -> list[dict]:
    """Each target of the issue with the measured figure it is judged on."""
    res = []

    def add(name, value, ok, note=""):
        res.append({"target": name, "measured": value, "ok": ok, "note": note})

    p = out.get("parse")
    if p:
        s = p["sample"]
        sp = min(s["speedup_vs_plain_l4"], s["speedup_vs_plain_bare"])
        cpu_sp = min(s["cpu_speedup_vs_plain_bare"] or math.inf,
                     s["cpu_speedup_vs_plain_l4"] or math.inf)
        add("fast path >= 50x plain drain3 (sample)", f"{sp:.1f}x wall, {cpu_sp:.1f}x CPU",
            sp >= TARGETS["speedup_vs_plain"], "vs the faster plain variant")
        f = p["file"]["lines_per_s"]
        add(">= 1,000,000 lines/s, one node file, 1 core", f"{f:,.0f}",
            f >= TARGETS["fast_lines_per_s"])
        two = [j for j in p["job"] if j["workers"] == 2]
        if two:
            v = two[0]["lines_per_s"]
            add(">= 1,000,000 lines/s, whole job, 2 workers", f"{v:,.0f}",
                v >= TARGETS["fast_lines_per_s"])
        a = min(s["agreement_fast_plain_l4"], s["agreement_fast_plain_bare"])
        add("agreement with plain drain3 >= 0.99 (generated sample)", f"{a:.4f}",
            a >= TARGETS["agreement"])
    e2e = [r for r in out.get("end_to_end", []) if r.get("rc") == 0]
    if e2e:
        big = max(e2e, key=lambda r: r["input_bytes"])
        # the simulated failed job stops at its failure, so 256x40MB writes somewhat less
        # than 10 GB: the time is judged as measured and also scaled to 10 GB by its lines/s
        is_big = big["nodes"] >= 256 and big["input_bytes"] >= 8 * (1 << 30)
        at_10gb = big["wall_s"] * (10 * (1 << 30)) / big["input_bytes"]
        add(f"10 GB / 256-node job end to end < 90 s ({big['size']}, "
            f"{_human(big['input_bytes'])})",
            f"{big['wall_s']:.1f} s" + (f" (10 GB: ~{at_10gb:.0f} s)" if is_big else ""),
            at_10gb < TARGETS["big_wall_s"] if is_big else None,
            f"load {big['load_before']:.1f} before the run" if is_big
            else "largest size run is smaller; use --big")
        rss = max(r["peak_tree_rss_mb"] for r in e2e)
        add("peak RSS < 2 GB (largest over sizes, process tree)", f"{rss:.0f} MB",
            rss < TARGETS["peak_rss_mb"])
    lh = [r for r in out.get("loghub", []) if "agreement" in r]
    if lh:
        worst = min(lh, key=lambda r: r["agreement"])
        add("agreement with plain drain3 >= 0.99 (every Loghub dataset)",
            f"{worst['agreement']:.4f} ({worst['dataset']})",
            worst["agreement"] >= TARGETS["agreement"])
        mean = float(np.mean([r["ga_fast"] for r in lh]))
        add(f"Loghub GA mean (fast path) >= {TARGETS['loghub_ga_mean']} (16 datasets)",
            f"{mean:.4f} over {len(lh)}", mean >= TARGETS["loghub_ga_mean"] and len(lh) == 16,
            "" if len(lh) == 16 else "not all 16 datasets measured")
        worse = [r["dataset"] for r in lh if r["ga_fast"] < r["ga_plain"]]
        add("Loghub GA fast >= plain on every dataset",
            "all" if not worse else f"worse on {', '.join(worse)}", not worse)
    return res


def print_targets(rows: list[dict]) -> None:
    print(table("Targets (issue)", ["target", "measured", "met", "note"],
                [[r["target"], r["measured"],
                  "n/a" if r["ok"] is None else ("yes" if r["ok"] else "NO"), r["note"]]
                 for r in rows]))


# ==========================================================================================
# Main
# ==========================================================================================


def plain_drain3_rate(job: Job, work: Path, n_lines: int = 20_000) -> dict:
    """Plain drain3 (every record line masked and fed to the miner) on a sample of the job,
    in this run: the reference the default command's line rate is compared with."""
    sample = build_sample(job, n_lines, work / "drain3-sample.log")
    plain = plain_parse(sample)
    return {"lines": plain.n_lines, "s": plain.seconds,
            "lines_per_s": plain.n_lines / plain.seconds}


def _main_user_path(args, sizes: list[Size], work: Path, framework: str | None,
                    out: dict) -> int:
    """``--user-path``: generate each size and time :func:`user_paths` on it; a job of
    1 GB or more gets one run per way, no served or ``kb match`` rows, and plain drain3's
    line rate on a sample of it; ``--series N`` adds the series of small jobs."""
    out["user_paths"] = []
    try:
        for size in sizes:
            job_dir = work / f"job-{size.label}"
            if args.reuse and (job_dir / "truth.json").exists():
                job = existing_job(job_dir)
            else:
                shutil.rmtree(job_dir, ignore_errors=True)
                job = generate_job(job_dir, size, seed=args.seed, framework=framework,
                                   n_baselines=args.baselines, generator=args.generator,
                                   progress_who=args.progress_who)
            print(f"[{size.label}] {job.files} files, {_human(job.bytes)}, {job.lines:,} lines "
                  f"(+ baselines {_human(job.base_bytes)})", flush=True)
            big = job.bytes >= (1 << 30)
            rows = user_paths(job, size, work, repeats=args.repeats,
                              served=not big and not args.no_served, kb_match=not big, big=big)
            for r in rows:  # every line the command parses: the job's and its baselines'
                r["lines"] = job.lines + job.base_lines
            if big:
                ref = plain_drain3_rate(job, work)
                out.setdefault("drain3", {})[size.label] = ref
                for r in rows:
                    r["x_drain3"] = job.lines / r["wall_s"] / ref["lines_per_s"]
                print(f"[{size.label}] plain drain3 on {ref['lines']:,} sample lines: "
                      f"{ref['lines_per_s']:,.0f} lines/s", flush=True)
            out["user_paths"] += rows
            if not args.keep and not args.reuse:
                shutil.rmtree(job_dir, ignore_errors=True)
        if args.series:
            out["series"] = series(work, args.series, args.seed + 100, framework, args.generator)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print_user_paths(out["user_paths"])
    for label, ref in out.get("drain3", {}).items():
        rows = [r for r in out["user_paths"] if r["size"] == label]
        np_row = next((r for r in rows if r["how"] == "--no-prefect"), None)
        for r in rows:
            ratio = r["wall_s"] / np_row["wall_s"] if np_row else math.nan
            print(f"[{label}] {r['how']}: {r['lines'] / r['wall_s']:,.0f} lines/s = "
                  f"{r['x_drain3']:.1f}x plain drain3 ({ref['lines_per_s']:,.0f} lines/s); "
                  f"{ratio:.2f}x the --no-prefect wall time")
    if out.get("series"):
        print_series(out["series"])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1, default=_jsonable) + "\n")
    bad = [r for r in out["user_paths"] if r.get("rc") != 0]
    return 1 if bad or (out.get("series") or {}).get("failed") else 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=DEFAULT_SIZES,
                    help=f"comma-separated NODESxBYTES job sizes (default {DEFAULT_SIZES})")
    ap.add_argument("--big", action="store_true",
                    help=f"add the {BIG_SIZE} (~10 GB) job; needs ~11 GB of disk, not for CI")
    ap.add_argument("--sample", type=int, default=200_000,
                    help="lines in the plain-vs-fast sample (plain drain3 is slow)")
    ap.add_argument("--work", type=Path, default=None,
                    help="where generated jobs go (default: a temp dir under /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep generated data")
    ap.add_argument("--json", type=Path, default=None, help="also write every figure here")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--framework", default="megatron",
                    help="simulated framework (long Megatron lines by default); 'any' = seed's")
    ap.add_argument("--baselines", type=int, default=0,
                    help="successful baseline jobs per case, passed to l4 diagnose")
    ap.add_argument("--generator", choices=("auto", "simulate", "synthetic"), default="auto")
    ap.add_argument("--loghub", type=Path, default=DEFAULT_LOGHUB)
    ap.add_argument("--no-loghub", action="store_true")
    ap.add_argument("--user-path", action="store_true",
                    help="only time l4 diagnose as users run it: --no-prefect vs the default "
                    "command with and without l4's local Prefect server (default size 8x2MB)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="--user-path: runs per steady-state way (the median is shown)")
    ap.add_argument("--series", type=int, default=0,
                    help="--user-path: also diagnose a series of N small jobs, starting with "
                    "no server")
    ap.add_argument("--reuse", action="store_true",
                    help="--user-path: reuse a job already generated under --work (and keep it)")
    ap.add_argument("--no-served", action="store_true",
                    help="--user-path: skip the l4 serve row")
    ap.add_argument("--progress-who", default=None, choices=("r0", "last", "l0", "all"),
                    help="who prints the iteration line (l0: every node; default: the seed's)")
    ap.add_argument("--loghub-datasets", default="",
                    help="comma-separated subset of Loghub datasets (default: all present)")
    args = ap.parse_args(argv)

    if args.user_path and args.sizes == DEFAULT_SIZES:
        args.sizes = "8x2MB"
    try:
        sizes = parse_sizes(args.sizes)
    except argparse.ArgumentTypeError as exc:
        ap.error(str(exc))
    if args.big:
        sizes.append(parse_size(BIG_SIZE))
    if not sizes:
        ap.error("no job sizes given")
    if args.sample < 1000:
        ap.error("--sample must be at least 1000 lines")
    if args.baselines < 0:
        ap.error("--baselines cannot be negative")
    sizes = sorted(set(sizes), key=lambda s: s.n_nodes * s.bytes_per_node)
    # the parse section runs on the largest size that is not the big one (plain drain3 and
    # the 1-worker whole-job scan would take too long there), unless only big sizes are run
    small = [s for s in sizes if s != parse_size(BIG_SIZE)] or sizes
    parse_on = small[-1]
    framework = None if args.framework == "any" else args.framework
    work = args.work or Path(tempfile.mkdtemp(prefix="l4-perf-", dir="/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    need = sum(s.n_nodes * s.bytes_per_node * (1 + args.baselines) for s in sizes)
    free = shutil.disk_usage(work).free
    if need * 1.2 > free:
        ap.error(f"{work}: about {_human(need)} of logs needed, only {_human(free)} free")

    out: dict = {
        "machine": {"cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
                    "python": sys.version.split()[0], "load_at_start": os.getloadavg()},
        "args": {k: str(v) for k, v in vars(args).items()},
        "end_to_end": [],
    }
    cap = parallel_capacity()
    out["machine"]["capacity_at_start"] = cap
    print(f"l4 performance benchmark  (cpus={out['machine']['affinity']}, "
          f"load {out['machine']['load_at_start'][0]:.1f}, 2-process speed-up on a CPU loop "
          f"{cap['speedup_2proc']:.2f} (2.00 = both cores free), work dir {work}, "
          f"sizes {', '.join(s.label for s in sizes)}, baselines {args.baselines})\n")
    if args.user_path:
        return _main_user_path(args, sizes, work, framework, out)
    try:
        out["cli_startup_s"] = cli_startup(work)
        for size in sizes:
            job_dir = work / f"job-{size.label}"
            shutil.rmtree(job_dir, ignore_errors=True)
            print(f"[{size.label}] generating ...", flush=True)
            job = generate_job(job_dir, size, seed=args.seed, framework=framework,
                               n_baselines=args.baselines, generator=args.generator)
            print(f"[{size.label}] {job.generator}: {job.files} files, {_human(job.bytes)}, "
                  f"{job.lines:,} lines (+ baselines {_human(job.base_bytes)}) in "
                  f"{job.gen_s:.0f} s; running l4 diagnose ...", flush=True)
            row = end_to_end(job, size, work)
            out["end_to_end"].append(row)
            print(f"[{size.label}] diagnose {row['wall_s']:.2f} s, tree RSS "
                  f"{row['peak_tree_rss_mb']:.0f} MB", flush=True)
            if size == parse_on:
                print(f"[{size.label}] parse throughput (plain drain3 on {args.sample:,} "
                      "lines takes a while) ...", flush=True)
                workers = (1, 2) if job.bytes < (4 << 30) else (2,)
                out["parse"] = parse_throughput(job, args.sample, work, whole_job_workers=workers)
                out["parse"]["size"] = size.label
            if not args.keep:
                shutil.rmtree(job_dir, ignore_errors=True)
        out["growth"] = growth(out["end_to_end"])
        if not args.no_loghub:
            only = [d.strip() for d in args.loghub_datasets.split(",") if d.strip()]
            unknown = [d for d in only if d not in LOG_FORMATS]
            if unknown:
                ap.error(f"unknown Loghub dataset(s) {', '.join(unknown)}")
            names = loghub_datasets(args.loghub, only or None)
            if not names:
                print(f"Loghub-2k not found under {args.loghub}; section skipped\n")
            lh_dir = work / "loghub"
            lh_dir.mkdir(exist_ok=True)
            out["loghub"] = [loghub_one(args.loghub, d, lh_dir) for d in names]
    except JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
        elif args.keep:
            print(f"generated data kept in {work}")

    print()
    if "parse" in out:
        print_parse(out["parse"])
    print_e2e(out["end_to_end"], out["growth"], out["cli_startup_s"])
    if out.get("loghub"):
        print_loghub(out["loghub"])
    out["targets"] = check_targets(out)
    print_targets(out["targets"])
    cap = parallel_capacity()
    out["machine"]["capacity_at_end"] = cap
    print(f"machine at the end: load {cap['load']:.1f}, 2-process speed-up on a CPU loop "
          f"{cap['speedup_2proc']:.2f} (figures are wall-clock on a shared machine; "
          "the CPU-second columns are steadier)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1, default=_jsonable) + "\n")
        print(f"figures written to {args.json}")
    failed = [r for r in out["end_to_end"] if r.get("rc") != 0]
    return 1 if failed else 0


def _jsonable(v):
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, np.generic):
        return v.item()
    if hasattr(v, "__dataclass_fields__"):
        return asdict(v)
    return str(v)


if __name__ == "__main__":
    sys.exit(main())
