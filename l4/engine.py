"""The diagnosis pipeline as plain functions: scan -> merge -> cross-job -> spatial ->
temporal -> indicators -> report.  Prefect flows (``flows/``) call these same functions
task by task; nothing here imports Prefect.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from l4.chartdata import attach_healthy_band, healthy_durations
from l4.crossjob import (
    EventStat,
    merge_stats,
    stats_from_jobs,
    stats_from_rows,
)
from l4.ingest import JobError, JobSpec, NodeFile, discover
from l4.merge import ParsedJob, merge_scans
from l4.phases import Timeline, learn_timeline, merge_timelines, timeline_from_rows
from l4.progress import reporter
from l4.scan import NodeScan, scan_node_file
from l4.steps import Reference, run_steps
from l4.templates import TemplateStore, default_store_path, open_store

#: below this many bytes in total, scanning in-process beats starting worker processes
PARALLEL_MIN_BYTES = 64 << 20


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2)


def scan_files(files: Sequence[NodeFile], workers: int | None = None) -> list[NodeScan]:
    """Scan node files, one per core; small jobs stay in-process."""
    workers = workers or default_workers()
    total = 0
    for nf in files:
        try:
            total += nf.path.stat().st_size
        except OSError:
            pass
    progress = reporter()
    progress.add_files(len(files), total)
    if workers <= 1 or len(files) <= 1 or total < PARALLEL_MIN_BYTES:
        out_inline = []
        for nf in files:
            out_inline.append(scan_node_file(nf))
            progress.file_done(_size(nf))
        return out_inline
    ctx = mp.get_context("forkserver")
    # largest files first so the last worker is not left with the biggest one
    order = sorted(range(len(files)), key=lambda i: -_size(files[i]))
    with ProcessPoolExecutor(max_workers=min(workers, len(files)), mp_context=ctx) as pool:
        results = []
        for i, res in zip(order, pool.map(scan_node_file, [files[i] for i in order],
                                          chunksize=1), strict=True):
            results.append(res)
            progress.file_done(_size(files[i]))
    out: list[NodeScan | None] = [None] * len(files)
    for i, res in zip(order, results, strict=True):
        out[i] = res
    return [r for r in out if r is not None]


def _size(nf: NodeFile) -> int:
    try:
        return nf.path.stat().st_size
    except OSError:
        return 0


def parse_job(spec: JobSpec, scans: list[NodeScan], store: TemplateStore) -> ParsedJob:
    """Merge scans through the shared template store."""
    return merge_scans(spec, scans, store)


def baseline_stats(
    failed: ParsedJob,
    baselines: Iterable[ParsedJob],
    pool_rows: list[dict] | None,
    store: TemplateStore,
) -> tuple[dict[int, EventStat], list[str], bool, list[str]]:
    """Healthy statistics from baseline jobs and the stored pool; skips mismatched configs."""
    usable, names, warnings = [], [], []
    for b in baselines:
        if failed.config_id and b.config_id and b.config_id != failed.config_id:
            warnings.append(
                f"baseline {b.root} ignored: config_id {b.config_id!r} differs from the failed "
                f"job's {failed.config_id!r}"
            )
            continue
        usable.append(b)
        names.append(b.job_id)
    parts = [stats_from_jobs(usable)] if usable else []
    pool_used = bool(pool_rows)
    if pool_rows:
        parts.append(stats_from_rows(pool_rows, lambda t: store.match(t)))
    return merge_stats(*parts), names, pool_used, warnings


def usable_baselines(failed: ParsedJob, baselines: Iterable[ParsedJob]) -> list[ParsedJob]:
    """The baselines of the failed job's configuration (all of them when either has none)."""
    return [b for b in baselines
            if not (failed.config_id and b.config_id and b.config_id != failed.config_id)]


def baseline_timeline(failed: ParsedJob, baselines: Iterable[ParsedJob],
                      pool_rows: list[dict] | None = None,
                      store: TemplateStore | None = None) -> Timeline | None:
    """What the healthy baselines and the stored pool printed, and in which order
    (``l4.phases``); ``store`` matches the pool's template texts."""
    learned = learn_timeline(usable_baselines(failed, baselines))
    phased = [r for r in pool_rows or [] if r.get("phase")]
    if not phased or store is None:
        return learned
    pooled = timeline_from_rows(phased, store.match, jobs=len({r.get("job_id") for r in phased}))
    return merge_timelines(learned, pooled)


def analyze_job(failed: ParsedJob, stats: dict[int, EventStat] | None, *,
                baseline_jobs: list[str] | None = None, pool_used: bool = False,
                timeline: Timeline | None = None) -> dict:
    """Everything after parsing (``l4.steps.ANALYSIS``): filter, rank, time, pick events,
    build the report."""
    reference = Reference(stats, list(baseline_jobs or []), pool_used, timeline)
    return run_steps({"failed": failed, "reference": reference})["report"]


def diagnose(
    job_dir: str | Path,
    baselines: Sequence[str | Path] = (),
    *,
    store_path: str | Path | None | bool = None,
    pool_rows: list[dict] | None = None,
    workers: int | None = None,
) -> dict:
    """Diagnose one failed job directory; returns the report dict (see ``l4.report``).

    ``store_path``: the persisted template store (default: the user's data dir; ``False``
    keeps templates in memory only).  ``pool_rows``: a stored normal pool for the job's
    configuration (``l4.kbstore.load_normal_rows``).
    """
    t0 = time.perf_counter()
    spec = discover(job_dir)
    base_specs: list[JobSpec] = []
    skipped: list[str] = []
    for b in baselines:
        try:
            base_specs.append(discover(b))
        except JobError as exc:
            skipped.append(f"baseline skipped: {exc}")
    all_files = list(spec.files) + [f for s in base_specs for f in s.files]
    scans = scan_files(all_files, workers)
    t_scan = time.perf_counter()
    n_failed = len(spec.files)
    reporter().step("merging templates")
    path = None if store_path is False else (store_path or default_store_path())
    with open_store(path) as store:
        failed = parse_job(spec, scans[:n_failed], store)
        parsed_baselines = []
        k = n_failed
        for bs in base_specs:
            parsed_baselines.append(parse_job(bs, scans[k: k + len(bs.files)], store))
            k += len(bs.files)
        stats, names, pool_used, warn = baseline_stats(failed, parsed_baselines, pool_rows, store)
        timeline = baseline_timeline(failed, parsed_baselines, pool_rows, store)
    failed.warnings.extend(skipped + warn)
    t_parse = time.perf_counter()
    reporter().step("analysing nodes and iterations")
    report = analyze_job(failed, stats, baseline_jobs=names, pool_used=pool_used,
                         timeline=timeline)
    attach_healthy_band(report, healthy_durations(parsed_baselines))
    t_end = time.perf_counter()
    report["timing"] = {
        "scan_s": round(t_scan - t0, 3),
        "merge_s": round(t_parse - t_scan, 3),
        "analyze_s": round(t_end - t_parse, 3),
        "total_s": round(t_end - t0, 3),
    }
    return report
