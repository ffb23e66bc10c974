"""One failure, one diagnosis: the check that runs before a diagnosis starts.

An event (or ``l4 diagnose``) names the failure with ``l4.ingest.failure_key``.  When the
knowledge base already holds a diagnosis of that failure made from the same logs
(``l4.ingest.logs_fingerprint``), diagnosing again would only store a duplicate, so the
stored report is returned instead; ``force`` or changed logs diagnose again (and
``l4.kbstore.record_diagnosis`` still keeps one pending diagnosis per failure).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from l4.ingest import failure_key, logs_fingerprint


@dataclass(frozen=True)
class FailureId:
    """What identifies a failure and the state of its logs."""

    key: str
    fingerprint: str


def identify(job: str | Path, key: str | None = None) -> FailureId:
    """The failure's key (the event's, else derived from the directory) and log state."""
    return FailureId(key=key or failure_key(job), fingerprint=logs_fingerprint(job))


def previous_report(fid: FailureId, *, kb: Path | str | None = None) -> dict | None:
    """The stored report of this failure if it was made from the same logs, else None.

    The report comes back with ``diagnosis_id`` and ``already_diagnosed`` (id, status,
    when), so a caller can say what it found instead of diagnosing again.
    """
    from l4.kbstore import find_diagnosis

    found = find_diagnosis(fid.key, kb=kb)
    if not found or found.get("logs_fingerprint") != fid.fingerprint:
        return None
    rep = dict(found["report"])
    rep["diagnosis_id"] = found["id"]
    rep["already_diagnosed"] = {"diagnosis_id": found["id"], "status": found["status"],
                                "created_at": found["created_at"]}
    return rep


def stamp(report: dict, fid: FailureId) -> dict:
    """Mark a fresh report with the failure it is for (stored with it), in place."""
    report["failure_key"] = fid.key
    report["logs_fingerprint"] = fid.fingerprint
    return report
