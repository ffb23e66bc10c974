"""The diagnosis report: the stable JSON contract other tools read, and its text rendering.

Contract (fields are only ever added, never renamed or removed)::

    {"job_id": str, "stage": str,
     "nodes": [{"node": str, "score": float}, ...],          # every node, most suspicious first
     "iterations": [{"iteration": int, "score": float}, ...], # most suspicious first; [] if none
     "events": [{"template": str, "score": float, "nodes": [str], "count": int,
                 "examples": [{"file": str, "line": int, "text": str}, ...]}, ...],
     "root_causes": [...],
     "categories": [{"category": str, "confidence": float}, ...]}   # all four, best first
"""

from __future__ import annotations

import io
import math

from l4.category import format_category
from l4.chartdata import build_charts
from l4.crossjob import CrossJobResult
from l4.indicators import Indicator
from l4.merge import ParsedJob
from l4.spatial import NodeScore
from l4.temporal import TemporalResult

SCHEMA_VERSION = 1
NO_KNOWN_PATTERN = "no known pattern"


def _num(x: float) -> float:
    return round(float(x), 4) if math.isfinite(x) else 0.0


def build_report(job: ParsedJob, cross: CrossJobResult, ranked: list[NodeScore],
                 temporal: TemporalResult, events: list[Indicator]) -> dict:
    """Assemble the contract dict (root causes are added by the knowledge base)."""
    report = {
        "schema": SCHEMA_VERSION,
        "job_id": job.job_id,
        "config_id": job.config_id,
        "framework": temporal.profile,
        "stage": temporal.stage,
        "nodes": [{"node": s.node, "score": _num(s.score), "evidence": s.parts} for s in ranked],
        "iterations": [{"iteration": int(it), "score": _num(sc)} for it, sc in temporal.iterations],
        "events": [
            {
                "event_id": str(e.event_id),
                "template": e.template,
                "score": _num(e.score),
                "nodes": e.nodes,
                "count": e.count,
                "symptom": e.symptom,
                "examples": e.examples,
            }
            for e in events
        ],
        "root_causes": [],
        "onset": {"node": temporal.onset_node, "file": temporal.onset_file,
                  "line": temporal.onset_line,
                  "worked_past": [str(e) for e in temporal.worked_past]},
        "iteration_marker": temporal.marker_template,
        "baseline": {
            "used": cross.baseline_used or cross.pool_used,
            "jobs": cross.baseline_jobs,
            "pool": cross.pool_used,
        },
        "warnings": list(dict.fromkeys(job.warnings + cross.notes + temporal.notes)),
        "files": job.file_info,
        "stats": {
            "nodes": job.n_nodes,
            "lines": int(job.n_lines.sum()),
            "events": job.n_events,
            "kept_events": int(cross.kept.sum()),
        },
    }
    # what the HTML report draws; a picture must never cost the diagnosis itself
    try:
        report["charts"] = build_charts(job, cross, ranked, temporal.marker_template,
                                        temporal.stage, temporal.iterations, events)
    except Exception as exc:  # noqa: BLE001
        report["charts"] = {}
        report["warnings"].append(f"chart data unavailable: {type(exc).__name__}: {exc}")
    return report


#: how each piece of node evidence (``l4.spatial``) reads in the text report
_EVIDENCE_WORDS = {
    "named": "named as the failed node",
    "named_by_peers": "its peers' errors name it",
    "slowed_first": "slowed down before the others",
    "first_to_stop": "stopped seconds before the others, which stopped together",
    "stopped_counting_first": "its step counter stopped behind every other node's",
    "specific": "errors of its own",
    "odd_measurements": "its timers disagree with all others",
    "odd_in_symptom": "its copy of the failure line every node printed differs from all others'",
    "set_up_apart": "alone names something new in a line every node prints (set up unlike the others)",
    "missing_symptom": "lacks the timeouts the others show",
    "stopped_first": "stopped first",
    "iforest": "unusual event counts",
}


def _why(evidence: dict) -> str:
    """The strong pieces of a node's evidence, strongest first."""
    strong = sorted(((v, k) for k, v in evidence.items() if k in _EVIDENCE_WORDS and v >= 0.5),
                    reverse=True)
    return "; ".join(_EVIDENCE_WORDS[k] for _, k in strong[:3])


def render_text(report: dict, *, max_nodes: int = 5, max_events: int = 8) -> str:
    """A readable summary for the terminal (rich markup-free plain text with rich tables)."""
    from rich.console import Console
    from rich.markup import escape as esc
    from rich.table import Table

    buf = io.StringIO()
    console = Console(file=buf, width=110, force_terminal=False, color_system=None)
    stats = report.get("stats", {})
    console.print(
        f"[bold]Job {esc(str(report.get('job_id')))}[/bold]  "
        f"config={esc(str(report.get('config_id') or '-'))}  "
        f"framework={report.get('framework') or '-'}  nodes={stats.get('nodes', '?')}  "
        f"lines={stats.get('lines', '?')}"
    )
    base = report.get("baseline", {})
    if base.get("used"):
        src = ", ".join(base.get("jobs") or []) or "stored normal pool"
        console.print(f"Baseline: {esc(src)}")
    else:
        console.print("Baseline: none used (within-job comparison only)")
    console.print(f"Failure stage: [bold]{report.get('stage')}[/bold]")
    its = report.get("iterations") or []
    if its:
        console.print(
            "Suspicious iterations: " + ", ".join(str(i["iteration"]) for i in its[:5])
        )
    nodes = Table(title="Most suspicious nodes", show_lines=False)
    nodes.add_column("#", justify="right")
    nodes.add_column("node")
    nodes.add_column("score", justify="right")
    nodes.add_column("why")
    for i, n in enumerate(report.get("nodes", [])[:max_nodes], 1):
        nodes.add_row(str(i), esc(n["node"]), f"{n['score']:.3f}", _why(n.get("evidence") or {}))
    console.print(nodes)
    events = Table(title="Failure-indicating events", show_lines=False)
    events.add_column("score", justify="right")
    events.add_column("count", justify="right")
    events.add_column("nodes", justify="right")
    events.add_column("template / first example")
    for e in report.get("events", [])[:max_events]:
        ex = e["examples"][0] if e.get("examples") else None
        where = f"\n  {ex['file']}:{ex['line']}" if ex else ""
        events.add_row(f"{e['score']:.2f}", str(e["count"]), str(len(e["nodes"])),
                       esc(e["template"][:200] + where))
    console.print(events)
    causes = report.get("root_causes") or []
    cat_line = format_category(report.get("categories"))
    if cat_line:
        console.print(esc(cat_line))
    if causes:
        console.print("Suggested root causes:")
        for rc in causes[:3]:
            console.print(
                f"  - {esc(str(rc.get('title')))} \\[{rc.get('category')}] "
                f"(similarity {rc.get('similarity', 0):.2f}, id {rc.get('pattern_id')})"
            )
            if rc.get("action"):
                console.print(f"    action: {esc(rc['action'])}")
    elif "root_causes" in report and report.get("root_causes_status"):
        console.print(f"Root cause: {esc(report['root_causes_status'])}")
    if report.get("diagnosis_id"):
        did = esc(str(report["diagnosis_id"]))
        best = causes[0]["pattern_id"] if causes else "PATTERN_ID"
        console.print(
            f"Recorded as diagnosis {did}: confirm with `l4 confirm {did} --pattern {best}`, "
            f"or `l4 confirm {did} --new --title ... --category ... --action ...`"
        )
    for w in report.get("warnings", [])[:10]:
        console.print(f"warning: {esc(w)}")
    return buf.getvalue()
