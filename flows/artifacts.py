"""How a diagnosis report looks in the Prefect UI: a markdown summary and a node-score table.

Pure functions of the report dict, so they are tested without a server and the flow only
hands their output to ``create_markdown_artifact`` / ``create_table_artifact``.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

MAX_NODES = 10
MAX_EVENTS = 8


def artifact_key(prefix: str, job_id: object) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only; one key per job
    so that the UI shows the history of a job's diagnoses under one name."""
    slug = re.sub(r"[^a-z0-9]+", "-", str(job_id).lower()).strip("-") or "job"
    return f"{prefix}-{slug}"[:120].rstrip("-")


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#!|~])")


def md_text(text: object, limit: int = 160) -> str:
    """Untrusted text (a log line, a file name, a job id) as inert markdown: one line,
    bounded length, HTML special characters as entities, the markdown punctuation that can
    start markup backslash-escaped (no emphasis, code, link, image, heading, list or table
    break; a dash inside a name stays as it is), and no bare autolink (``http://``, ``www.``) for a renderer to turn into a link."""
    s = " ".join(str(text).split())
    s = s if len(s) <= limit else s[: limit - 1] + "…"
    s = _MD_SPECIAL.sub(r"\\\1", s)
    s = re.sub(r"^(\d+)\.", r"\1\\.", s)  # "1. x" would start a numbered list
    s = re.sub(r"^([-+=])", r"\\\1", s)  # a list item, a rule or a heading underline
    s = html.escape(s, quote=True)  # after: the entities' own '#' must stay as it is
    s = s.replace("://", ":&#47;&#47;")
    return re.sub(r"(?i)\bwww\.", "www&#46;", s)


_cell = md_text  # one markdown table cell


def summary_markdown(report: dict) -> str:
    """Top nodes, top events, stage, iterations and suggested root causes."""
    lines = [f"# l4 diagnosis of job {_cell(report.get('job_id'))}", ""]
    cfg = report.get("config_id") or "-"
    lines.append(f"- **Stage**: {_cell(report.get('stage', 'unknown'))}")
    its = report.get("iterations") or []
    lines.append(
        "- **Suspicious iterations**: "
        + (", ".join(_cell(i.get("iteration")) for i in its[:5]) if its else "none found")
    )
    lines.append(f"- **Configuration**: {_cell(cfg)}")
    base = report.get("baseline") or {}
    if base.get("used"):
        src = ", ".join(base.get("jobs") or []) or "stored normal pool"
        lines.append(f"- **Baseline**: {_cell(src)}")
    else:
        lines.append("- **Baseline**: none (within-job comparison)")
    if report.get("diagnosis_id"):
        did = _cell(report["diagnosis_id"], 40)
        lines.append(f"- **Diagnosis id**: {did} (l4 show {did})")
    lines += ["", "## Most suspicious nodes", "", "| # | node | score |", "|---:|---|---:|"]
    for i, n in enumerate((report.get("nodes") or [])[:MAX_NODES], 1):
        lines.append(f"| {i} | {_cell(n.get('node'))} | {float(n.get('score', 0)):.3f} |")
    lines += ["", "## Failure-indicating events", ""]
    events = (report.get("events") or [])[:MAX_EVENTS]
    if events:
        lines += ["| score | count | nodes | template | first example |", "|---:|---:|---:|---|---|"]
        for e in events:
            ex = (e.get("examples") or [{}])[0]
            where = f"{ex.get('file')}:{ex.get('line')}" if ex else ""
            lines.append(
                f"| {float(e.get('score', 0)):.2f} | {e.get('count', 0)} | "
                f"{len(e.get('nodes') or [])} | {_cell(e.get('template'))} | {_cell(where)} |"
            )
    else:
        lines.append("No event stands out.")
    lines += ["", "## Suggested root causes", ""]
    cats = report.get("categories") or []
    if cats and isinstance(cats[0], dict):
        top = cats[0]
        rest = ", ".join(f"{_cell(c.get('category'))} {float(c.get('confidence') or 0):.2f}"
                         for c in cats[1:] if isinstance(c, dict))
        lines.append(f"- **category: {_cell(top.get('category'))} "
                     f"({float(top.get('confidence') or 0):.2f})**" + (f" (then {rest})" if rest else ""))
        lines.append("")
    causes = report.get("root_causes") or []
    if causes:
        for rc in causes[:3]:
            lines.append(
                f"- **{_cell(rc.get('title'))}** \\[{_cell(rc.get('category'))}\\] — similarity "
                f"{float(rc.get('similarity') or 0):.2f}, pattern {_cell(rc.get('pattern_id'))}"
            )
            if rc.get("action"):
                lines.append(f"  - action: {_cell(rc['action'], 400)}")
    else:
        lines.append(_cell(report.get("root_causes_status") or "no known pattern"))
    failed = [f for f in report.get("files") or [] if f.get("status") == "error"]
    if failed:
        lines += ["", "## Unreadable node files", ""]
        lines += [f"- {_cell(f.get('file'))}: {_cell(f.get('error'))}" for f in failed]
    warnings = report.get("warnings") or []
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {_cell(w, 300)}" for w in warnings[:10]]
    return "\n".join(lines) + "\n"


def node_table(report: dict) -> list[dict]:
    """Every node with its score and the evidence behind it, most suspicious first."""
    rows = []
    for rank, n in enumerate(report.get("nodes") or [], 1):
        row = {"rank": rank, "node": n.get("node"), "score": n.get("score")}
        for k, v in (n.get("evidence") or {}).items():
            row[k] = v
        rows.append(row)
    return rows


def stored_html_path(report: dict, kb: str | os.PathLike | None) -> Path:
    """Where an automatic diagnosis keeps its HTML report: next to the knowledge base,
    ``reports/<diagnosis id>.html`` (the job id when the diagnosis was not recorded)."""
    if kb:
        base = Path(kb)
    else:
        from l4.kbstore import default_kb_path

        base = default_kb_path()
    name = report.get("diagnosis_id") or artifact_key("job", report.get("job_id"))
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(name)).strip(".-") or "report"
    return base.parent / "reports" / f"{name}.html"
