"""The cross-job filter: what is in this failed job that healthy jobs of its configuration
do not show — by presence *and* by frequency.

For every event a healthy job tells us the most any single node logged (as a count and as a
rate per record).  A node's count here is unusual only if it exceeds *both* expectations by a
wide margin (3x plus Poisson slack), so a failed job that stopped early is not flagged for its
start-up lines, a job that ran longer is not flagged for its iteration lines, yet an event
seen 3 times in a healthy job and 30,000 times on one node here is.  Baselines may have
fewer nodes and other host names: per-node maxima do not care.

Without any baseline, the job itself is the reference: an event is usual when most nodes log
it at similar counts, and only what reads like trouble (``l4.severity``) is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from l4.merge import ParsedJob
from l4.severity import severity

FACTOR = 3.0
SLACK = 3.0


@dataclass
class EventStat:
    """What healthy jobs say about one event."""

    max_count: float = 0.0  # most any node logged
    max_rate: float = 0.0  # most any node logged, per record
    node_frac: float = 0.0  # share of healthy nodes that logged it
    jobs: int = 0  # healthy jobs that logged it


@dataclass
class CrossJobResult:
    """Per (node, event): how far above healthy expectations; per event: kept or not."""

    excess: np.ndarray  # (nodes, events) float >= 0
    anomalous: np.ndarray  # (nodes, events) bool
    kept: np.ndarray  # (events,) bool
    novel: np.ndarray  # (events,) bool: never seen in a healthy job
    severity: np.ndarray  # (events,) float
    baseline_used: bool
    baseline_jobs: list[str] = field(default_factory=list)
    pool_used: bool = False
    notes: list[str] = field(default_factory=list)


def stats_from_jobs(jobs: list[ParsedJob]) -> dict[int, EventStat]:
    """Healthy-job statistics keyed by template-store cluster id."""
    out: dict[int, EventStat] = {}
    for job in jobs:
        recs = np.maximum(job.n_records, 1)
        for c, cid in enumerate(job.event_ids):
            col = job.counts[:, c]
            present = col > 0
            if not present.any():
                continue
            st = out.setdefault(cid, EventStat())
            st.max_count = max(st.max_count, float(col.max()))
            st.max_rate = max(st.max_rate, float((col / recs).max()))
            st.node_frac = max(st.node_frac, float(present.mean()))
            st.jobs += 1
    return out


def normal_rows(job: ParsedJob) -> list[dict]:
    """Rows describing a healthy job, for the stored normal pool (keyed by template text so
    they survive template-store changes; re-matched through drain3 when used)."""
    rows = []
    recs = np.maximum(job.n_records, 1)
    for c, tpl in enumerate(job.templates):
        col = job.counts[:, c]
        if not col.any():
            continue
        rows.append(
            {
                "template": tpl,
                "total_count": int(col.sum()),
                "n_nodes_with": int((col > 0).sum()),
                "n_nodes": int(job.n_nodes),
                "max_per_node": int(col.max()),
                "max_rate": float((col / recs).max()),
                "lines_total": int(job.n_records.sum()),
            }
        )
    return rows


def stats_from_rows(rows: list[dict], match) -> dict[int, EventStat]:
    """Pool rows -> statistics keyed by cluster id, via ``match(template) -> id | None``."""
    out: dict[int, EventStat] = {}
    for row in rows:
        cid = match(row["template"])
        if cid is None:
            continue
        st = out.setdefault(cid, EventStat())
        st.max_count = max(st.max_count, float(row["max_per_node"]))
        rate = row.get("max_rate")
        if rate is None:
            rate = row["max_per_node"] / max(1, row["lines_total"] / max(1, row["n_nodes"]))
        st.max_rate = max(st.max_rate, float(rate))
        st.node_frac = max(st.node_frac, row["n_nodes_with"] / max(1, row["n_nodes"]))
        st.jobs += 1
    return out


def merge_stats(*parts: dict[int, EventStat]) -> dict[int, EventStat]:
    out: dict[int, EventStat] = {}
    for part in parts:
        for cid, st in part.items():
            cur = out.setdefault(cid, EventStat())
            cur.max_count = max(cur.max_count, st.max_count)
            cur.max_rate = max(cur.max_rate, st.max_rate)
            cur.node_frac = max(cur.node_frac, st.node_frac)
            cur.jobs += st.jobs
    return out


def filter_events(
    job: ParsedJob,
    stats: dict[int, EventStat] | None,
    *,
    baseline_jobs: list[str] | None = None,
    pool_used: bool = False,
) -> CrossJobResult:
    """Decide, per node and event, what healthy jobs cannot explain."""
    sev = np.array([severity(t) for t in job.templates], dtype=np.float64)
    counts = job.counts.astype(np.float64)
    recs = np.maximum(job.n_records, 1).astype(np.float64)[:, None]
    if stats:
        max_count = np.array([stats[c].max_count if c in stats else 0.0 for c in job.event_ids])
        max_rate = np.array([stats[c].max_rate if c in stats else 0.0 for c in job.event_ids])
        novel = np.array([c not in stats for c in job.event_ids], dtype=bool)
        by_count = FACTOR * max_count[None, :]
        by_rate = FACTOR * max_rate[None, :] * recs
        expected = np.maximum(by_count, by_rate)
        expected = expected + SLACK * np.sqrt(expected) + (~novel)[None, :] * SLACK
        excess = np.clip(counts - expected, 0.0, None)
        anomalous = excess > 0
        kept = anomalous.any(axis=0)
        return CrossJobResult(
            excess=excess,
            anomalous=anomalous,
            kept=kept,
            novel=novel,
            severity=sev,
            baseline_used=bool(baseline_jobs),
            baseline_jobs=list(baseline_jobs or []),
            pool_used=pool_used,
        )
    return _within_job(job, sev)


def _within_job(job: ParsedJob, sev: np.ndarray) -> CrossJobResult:
    """No healthy reference: events that read like trouble, and counts far off the norm."""
    counts = job.counts.astype(np.float64)
    n = max(job.n_nodes, 1)
    present = counts > 0
    frac = present.mean(axis=0) if job.n_nodes else np.zeros(job.n_events)
    # typical count among the nodes that log an event
    med = np.array(
        [np.median(counts[present[:, c], c]) if present[:, c].any() else 0.0
         for c in range(job.n_events)]
    )
    far = counts > FACTOR * med[None, :] + SLACK * np.sqrt(med[None, :]) + SLACK
    troubling = sev[None, :] >= 0.5
    anomalous = present & (troubling | (far & (sev[None, :] > 0)))
    # an error-looking line that every node logs at the same rate all run long is routine
    routine = (frac >= 0.9) & (n > 2) & (sev < 1.0) & ~far.any(axis=0)
    anomalous &= ~routine[None, :]
    excess = np.where(anomalous, counts, 0.0)
    return CrossJobResult(
        excess=excess,
        anomalous=anomalous,
        kept=anomalous.any(axis=0),
        novel=np.ones(job.n_events, dtype=bool),
        severity=sev,
        baseline_used=False,
        notes=["no baseline: within-job reference and severity prior used"],
    )
