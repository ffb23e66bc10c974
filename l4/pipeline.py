"""Diagnosis plus the knowledge base, without Prefect: what ``l4 diagnose --no-prefect``
runs, and the same steps the ``diagnose-job`` flow runs as tasks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from l4.culprit_prior import apply_prior
from l4.engine import diagnose
from l4.ingest import discover
from l4.report import NO_KNOWN_PATTERN


def _load_pool(config_id: str | None, kb: Path | None) -> list[dict] | None:
    if not config_id:
        return None
    try:
        from l4.kbstore import load_normal_rows
    except ImportError:
        return None
    try:
        rows = load_normal_rows(config_id, kb=kb)
    except Exception as exc:  # a broken KB must not stop a diagnosis
        print(f"warning: normal pool unavailable ({exc})", file=sys.stderr)
        return None
    return rows or None


def top_node(report: dict) -> str | None:
    """The node the report ranks first, or None when it ranks none."""
    nodes = report.get("nodes")
    if isinstance(nodes, list) and nodes and isinstance(nodes[0], dict) and nodes[0].get("node"):
        return str(nodes[0]["node"])
    return None


def attach_root_causes(report: dict, *, kb: Path | None = None) -> dict:
    """Match the report's events against the fault-pattern library (in place): adds
    ``root_causes`` (above the similarity threshold, maybe none) and ``categories`` (all
    four, most likely first, always present when matching ran)."""
    try:
        from l4.rootcause import match_events
    except ImportError:
        report["root_causes_status"] = "knowledge base not installed"
        return report
    try:
        onset = report.get("onset")
        match = match_events(report.get("events", []), kb=kb, top=top_node(report),
                             onset=onset if isinstance(onset, dict) else None)
    except Exception as exc:
        report.setdefault("warnings", []).append(f"root-cause matching failed: {exc}")
        report["root_causes_status"] = f"matching failed: {exc}"
        return report
    report["root_causes"] = match.root_causes
    # a culprit singled out by what it did, not by what it said (l4.culprit_prior)
    report["categories"] = apply_prior(match.categories, report)
    report["root_causes_status"] = "matched" if match.root_causes else NO_KNOWN_PATTERN
    return report


def record(report: dict, *, kb: Path | None = None) -> dict:
    """Store the diagnosis in the knowledge base as pending; adds ``diagnosis_id``."""
    try:
        from l4.kbstore import record_diagnosis
    except ImportError:
        return report
    try:
        report["diagnosis_id"] = record_diagnosis(report, kb=kb)
    except Exception as exc:
        report.setdefault("warnings", []).append(f"diagnosis not recorded: {exc}")
    return report


def diagnose_and_record(job: Path, baselines: list[Path], *, kb: Path | None = None,
                        templates: Path | None = None, use_kb: bool = True,
                        workers: int | None = None, failure_key: str | None = None,
                        force: bool = False) -> dict:
    """Engine + normal pool + root causes + recording, the whole manual run.

    With the knowledge base, a failure already diagnosed from the same logs returns the
    stored report (``already_diagnosed``) unless ``force`` (``l4.idempotency``)."""
    spec_config = discover(job).config_id
    fid = None
    if use_kb:
        from l4.idempotency import identify, previous_report

        fid = identify(job, failure_key)
        if not force:
            try:
                previous = previous_report(fid, kb=kb)
            except Exception as exc:  # a broken KB is reported when recording
                print(f"warning: cannot look up earlier diagnoses ({exc})", file=sys.stderr)
                previous = None
            if previous is not None:
                return previous
    pool = _load_pool(spec_config, kb) if use_kb else None
    report = diagnose(job, baselines, store_path=templates, pool_rows=pool, workers=workers)
    if use_kb and fid is not None:
        from l4.idempotency import stamp
        from l4.progress import reporter

        stamp(report, fid)
        reporter().step("matching root causes")
        attach_root_causes(report, kb=kb)
        reporter().step("recording the diagnosis")
        record(report, kb=kb)
    return report


SUCCEEDED_STATUSES = ("succeeded", "success", "completed")


def check_learnable(spec, config_id: str | None, hint: str = "--config-id") -> str:
    """The configuration a healthy job teaches; refuse failed jobs and unknown configs."""
    if spec.status and spec.status not in SUCCEEDED_STATUSES:
        raise ValueError(f"{spec.root}: job.json says status={spec.status!r}; only successful "
                         "jobs can teach what normal looks like")
    cfg = config_id or spec.config_id
    if not cfg:
        raise ValueError(f"{spec.root}: no config_id in job.json; pass {hint}")
    return cfg


def learn_normal(job: Path, *, config_id: str | None = None, kb: Path | None = None,
                 templates: Path | None = None) -> dict:
    """A successful job's events enter the normal pool of its configuration."""
    from l4.engine import parse_job, scan_files
    from l4.kbstore import add_normal_job
    from l4.phases import pool_rows
    from l4.templates import default_store_path, open_store

    spec = discover(job)
    cfg = check_learnable(spec, config_id)
    scans = scan_files(spec.files)
    with open_store(templates or os.environ.get("L4_TEMPLATES") or default_store_path()) as store:
        parsed = parse_job(spec, scans, store)
    rows = pool_rows(parsed)
    add_normal_job(cfg, spec.job_id, rows, kb=kb)
    return {"job_id": spec.job_id, "config_id": cfg, "events": len(rows)}
