"""The SRE loop on the command line: inbox, show, confirm, reject and ``l4 kb ...``.

``register(app)`` attaches the commands to the main typer app (l4/cli.py).  Every
command opens the knowledge base only for the duration of its store calls, so a flow can
record diagnoses while an SRE works through the inbox.  Errors are printed as one line
on stderr with exit code 1, never as a traceback.
"""

from __future__ import annotations

import functools
import gzip
import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from l4 import kbstore
from l4.cli_errors import fail
from l4.kbstore import KBError

KbOption = Annotated[
    Path | None,
    typer.Option("--kb", envvar="L4_KB", help="Knowledge-base file (default: user data dir).",
                 show_default=False),
]


class Fmt(StrEnum):
    text = "text"
    json = "json"


class Category(StrEnum):
    hardware = "hardware"
    user = "user"
    platform = "platform"
    framework = "framework"


def _fail(msg: str) -> None:
    fail(msg, 1)


def _guard(fn):
    """Turn expected failures into one-line messages with exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KBError as exc:
            _fail(str(exc))
        except Exception as exc:  # model missing, unreadable files ...
            from l4.embed import EmbeddingModelMissing

            if isinstance(exc, EmbeddingModelMissing | OSError | ValueError | yaml.YAMLError):
                _fail(str(exc))
            raise

    return wrapper


def _print_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def _table(headers: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(*headers, show_lines=False, highlight=False)
    for r in rows:
        t.add_row(*r)
    Console(width=max(120, _term_width()), soft_wrap=False).print(t)


def _term_width() -> int:
    import shutil

    return shutil.get_terminal_size((120, 40)).columns


def _top_cause(report: dict) -> str:
    rc = report.get("root_causes") or []
    if not rc:
        return "no known pattern"
    best = rc[0]
    return f"{best.get('pattern_id')} ({float(best.get('similarity', 0)):.2f})"


def _top_category(report: dict) -> str:
    """'hardware (0.81)' for the inbox; '-' for reports stored before categories existed."""
    cats = report.get("categories") or []
    if not cats or not isinstance(cats[0], dict):
        return "-"
    try:
        return f"{cats[0]['category']} ({float(cats[0]['confidence']):.2f})"
    except (KeyError, TypeError, ValueError):
        return "-"


def _resolve_diag(diag_id: str, kb: Path | None) -> dict:
    d = kbstore.get_diagnosis(diag_id, kb=kb)
    if d is None:
        raise KBError(f"no diagnosis {diag_id!r} (see 'l4 inbox --all')")
    return d


def _render_report(report: dict) -> str:
    as_json = json.dumps(report, indent=2, ensure_ascii=False, default=str)
    try:
        from l4.report import render_text  # owned by the report module; optional here
    except ImportError:
        return as_json
    try:
        return render_text(report)
    except Exception:  # an older/partial stored report must still be viewable
        return as_json


# --- SRE loop ----------------------------------------------------------------------------


@_guard
def inbox(
    kb: KbOption = None,
    all_: Annotated[bool, typer.Option("--all", help="All diagnoses, not only pending.")] = False,
    status: Annotated[str | None, typer.Option(help="Only this status: pending|confirmed|rejected.")] = None,
    limit: Annotated[int, typer.Option(help="Show at most this many.")] = 50,
    fmt: Annotated[Fmt, typer.Option("--format", help="text or json")] = Fmt.text,
) -> None:
    """Diagnoses waiting for an SRE decision, newest first."""
    st = status if status else (None if all_ else "pending")
    diags = kbstore.list_diagnoses(st, kb=kb)[: max(limit, 0)]
    if fmt == Fmt.json:
        _print_json([{k: v for k, v in d.items() if k != "report"}
                     | {"stage": d["report"].get("stage"), "root_causes": d["report"].get("root_causes", []),
                        "categories": d["report"].get("categories", [])}
                     for d in diags])
        return
    if not diags:
        typer.echo("inbox empty" if st == "pending" else "no diagnoses")
        return
    rows = []
    for d in diags:
        rep = d["report"]
        nodes = rep.get("nodes") or []
        culprit = str(nodes[0].get("node")) if nodes and isinstance(nodes[0], dict) else "-"
        rows.append([
            d["id"], (d["created_at"] or "")[:19], str(d["job_id"] or "-"), d["status"],
            str(rep.get("stage") or "-"), culprit, _top_category(rep),
            d["pattern_id"] if d["status"] == "confirmed" else _top_cause(rep),
        ])
    _table(["id", "created (UTC)", "job", "status", "stage", "top node", "category", "root cause"], rows)


@_guard
def show(
    diag_id: Annotated[str, typer.Argument(metavar="ID", help="Diagnosis id (or unique prefix).")],
    kb: KbOption = None,
    fmt: Annotated[Fmt, typer.Option("--format", help="text or json")] = Fmt.text,
    html: Annotated[Path | None, typer.Option(
        "--html", help="also write the report as a self-contained HTML file")] = None,
) -> None:
    """Show one diagnosis report."""
    d = _resolve_diag(diag_id, kb)
    if html is not None:
        from l4.cli import write_html_report
        from l4.htmlreport import check_writable

        problem = check_writable(html)
        if problem:
            raise KBError(problem)
        rep = dict(d["report"]) if isinstance(d["report"], dict) else {}
        rep.setdefault("diagnosis_id", d["id"])
        write_html_report(rep, html, diagnosis=d)
    if fmt == Fmt.json:
        _print_json(d)
        return
    line = f"diagnosis {d['id']}  job {d['job_id'] or '-'}  status {d['status']}"
    if d["status"] == "confirmed":
        line += f" as {d['pattern_id']} by {d['decided_by']} at {d['decided_at'][:19]}"
    elif d["status"] == "rejected":
        line += f" by {d['decided_by']}: {d['reason']}"
    typer.echo(line)
    typer.echo(_render_report(d["report"]))


@_guard
def confirm(
    diag_id: Annotated[str, typer.Argument(metavar="ID", help="Diagnosis id (or unique prefix).")],
    pattern: Annotated[str | None, typer.Option("--pattern", help="Existing pattern id.")] = None,
    new: Annotated[bool, typer.Option("--new", help="Create a new pattern from this diagnosis.")] = False,
    title: Annotated[str | None, typer.Option(help="Title of the new pattern.")] = None,
    category: Annotated[Category | None, typer.Option(help="Category of the new pattern.")] = None,
    action: Annotated[str | None, typer.Option(help="Recommended action of the new pattern.")] = None,
    description: Annotated[str | None, typer.Option(help="Description of the new pattern.")] = None,
    pattern_id: Annotated[str | None, typer.Option("--id", help="Id of the new pattern (default: from title).")] = None,
    by: Annotated[str | None, typer.Option(help="Who confirms (default: $USER).")] = None,
    embed: Annotated[bool, typer.Option(help="Re-embed the pattern now (else at the next match).")] = True,
    kb: KbOption = None,
) -> None:
    """Confirm a diagnosis' root cause: an existing pattern, or --new with title/category/action."""
    d = _resolve_diag(diag_id, kb)
    if new == (pattern is not None):
        raise KBError("give either --pattern PID or --new (with --title, --category, --action)")
    new_pattern = None
    if new:
        missing = [n for n, v in (("--title", title), ("--category", category), ("--action", action)) if not v]
        if missing:
            raise KBError(f"--new needs {', '.join(missing)}")
        new_pattern = {"title": title, "category": category.value, "action": action,
                       "description": description or ""}
        if pattern_id:
            new_pattern["id"] = pattern_id
    pid = kbstore.confirm_diagnosis(d["id"], pattern_id=pattern, new_pattern=new_pattern, by=by, kb=kb)
    if embed:
        from l4.rootcause import category_model, ensure_embeddings

        ensure_embeddings(kb)
        category_model(kb)  # the confirmation is new evidence: refit the category classifier now
    typer.echo(f"confirmed {d['id']} as {pid}")


@_guard
def reject(
    diag_id: Annotated[str, typer.Argument(metavar="ID", help="Diagnosis id (or unique prefix).")],
    reason: Annotated[str, typer.Option("--reason", help="Why the diagnosis is wrong.")],
    by: Annotated[str | None, typer.Option(help="Who rejects (default: $USER).")] = None,
    kb: KbOption = None,
) -> None:
    """Reject a diagnosis (the suggestion was wrong or the job did not really fail)."""
    d = _resolve_diag(diag_id, kb)
    kbstore.reject_diagnosis(d["id"], reason=reason, by=by, kb=kb)
    typer.echo(f"rejected {d['id']}")


# --- kb sub-commands --------------------------------------------------------------------


def _pattern_text(p: dict) -> str:
    out = [
        f"{p['id']}  [{p['category']}{', symptom' if p['kind'] == 'symptom' else ''}]",
        f"  {p['title']}",
        f"  confirmed {p['times_confirmed']}x, origin {p['origin']}, updated {p['updated_at'][:19]}",
    ]
    if p["description"]:
        out.append(f"  description: {p['description']}")
    if p["action"]:
        out.append(f"  action: {p['action']}")
    if p["codes"]:
        out.append(f"  codes: {', '.join(p['codes'])}" + (" (required)" if p["requires_code"] else ""))
    out.append("  indicators:")
    out += [f"    - {i}" for i in p["indicators"]]
    if p["sources"]:
        out.append("  sources:")
        out += [f"    - {s}" for s in p["sources"]]
    return "\n".join(out)


def kb_list(
    kb: KbOption = None,
    category: Annotated[Category | None, typer.Option(help="Only this category.")] = None,
    fmt: Annotated[Fmt, typer.Option("--format", help="text or json")] = Fmt.text,
) -> None:
    """List the fault patterns."""
    pats = kbstore.list_patterns(kb=kb, category=category.value if category else None)
    if fmt == Fmt.json:
        _print_json(pats)
        return
    _table(["id", "category", "kind", "confirmed", "title"],
           [[p["id"], p["category"], p["kind"], str(p["times_confirmed"]), p["title"]] for p in pats])


def kb_show(
    pattern_id: Annotated[str, typer.Argument(metavar="PID")],
    kb: KbOption = None,
    fmt: Annotated[Fmt, typer.Option("--format", help="text or json")] = Fmt.text,
) -> None:
    """Show one fault pattern."""
    p = kbstore.get_pattern(pattern_id, kb=kb)
    if p is None:
        raise KBError(f"no pattern {pattern_id!r} (see 'l4 kb list')")
    if fmt == Fmt.json:
        _print_json(p)
    else:
        typer.echo(_pattern_text(p))


def kb_search(
    text: Annotated[str, typer.Argument(help="Free text or a log line.")],
    kb: KbOption = None,
    top: Annotated[int, typer.Option(help="How many patterns.")] = 5,
    fmt: Annotated[Fmt, typer.Option("--format", help="text or json")] = Fmt.text,
) -> None:
    """Patterns most similar to TEXT (no threshold)."""
    from l4.rootcause import match_lines

    res = match_lines([text], kb=kb, top_k=max(top, 1), threshold=0.0)
    if fmt == Fmt.json:
        _print_json(res)
        return
    if not res:
        typer.echo("no pattern")
        return
    _table(["similarity", "id", "category", "title"],
           [[f"{r['similarity']:.3f}", r["pattern_id"], r["category"], r["title"]] for r in res])


def kb_add(
    kb: KbOption = None,
    file: Annotated[Path | None, typer.Option("--file", help="YAML/JSON with one pattern or a list (or {patterns: [...]}).")] = None,
    pattern_id: Annotated[str | None, typer.Option("--id", help="Pattern id (slug).")] = None,
    title: Annotated[str | None, typer.Option(help="Title.")] = None,
    category: Annotated[Category | None, typer.Option(help="Category.")] = None,
    action: Annotated[str | None, typer.Option(help="Recommended action.")] = None,
    description: Annotated[str, typer.Option(help="Description.")] = "",
    symptom: Annotated[bool, typer.Option("--symptom", help="The pattern is a symptom, not a cause.")] = False,
    indicator: Annotated[list[str] | None, typer.Option("--indicator", help="Message example/template (repeatable).")] = None,
    code: Annotated[list[str] | None, typer.Option("--code", help="Exact error code (repeatable).")] = None,
    source: Annotated[list[str] | None, typer.Option("--source", help="Source URL (repeatable).")] = None,
    embed: Annotated[bool, typer.Option(help="Embed the new pattern(s) now.")] = True,
) -> None:
    """Add fault patterns, from options or from --file."""
    if file is not None:
        doc = yaml.safe_load(file.read_text(encoding="utf-8"))
        items = doc.get("patterns", [doc]) if isinstance(doc, dict) else doc
        if not isinstance(items, list) or not items:
            raise KBError(f"{file}: expected a pattern, a list of patterns or {{patterns: [...]}}")
        # Validate all before writing any so a bad file changes nothing.
        pats = [kbstore.validate_pattern(p) for p in items]
    else:
        if not (title and category and action):
            raise KBError("kb add needs --title, --category and --action (or --file)")
        pats = [kbstore.validate_pattern({
            "id": pattern_id or kbstore.slugify(title), "title": title, "category": category.value,
            "kind": "symptom" if symptom else "cause", "action": action, "description": description,
            "indicators": indicator or [], "codes": code or [], "sources": source or [],
        })]
    existing = {p["id"] for p in kbstore.list_patterns(kb=kb)}
    dup = [p["id"] for p in pats if p["id"] in existing]
    if dup:
        raise KBError(f"pattern(s) already exist: {', '.join(dup)} (use 'l4 kb edit')")
    kbstore.import_kb({"format": kbstore.EXPORT_FORMAT, "schema_version": kbstore.SCHEMA_VERSION,
                       "patterns": [p | {"origin": "sre"} for p in pats]}, kb=kb)
    if embed:
        from l4.rootcause import ensure_embeddings

        ensure_embeddings(kb)
    typer.echo("added " + ", ".join(p["id"] for p in pats))


def kb_edit(
    pattern_id: Annotated[str, typer.Argument(metavar="PID")],
    kb: KbOption = None,
    title: Annotated[str | None, typer.Option(help="New title.")] = None,
    category: Annotated[Category | None, typer.Option(help="New category.")] = None,
    action: Annotated[str | None, typer.Option(help="New action.")] = None,
    description: Annotated[str | None, typer.Option(help="New description.")] = None,
    kind: Annotated[str | None, typer.Option(help="cause or symptom.")] = None,
    add_indicator: Annotated[list[str] | None, typer.Option("--add-indicator", help="Append an indicator (repeatable).")] = None,
    remove_indicator: Annotated[list[str] | None, typer.Option("--remove-indicator", help="Remove an indicator by text or 1-based number.")] = None,
    add_code: Annotated[list[str] | None, typer.Option("--add-code", help="Append a code (repeatable).")] = None,
    remove_code: Annotated[list[str] | None, typer.Option("--remove-code", help="Remove a code.")] = None,
    add_source: Annotated[list[str] | None, typer.Option("--add-source", help="Append a source (repeatable).")] = None,
    embed: Annotated[bool, typer.Option(help="Re-embed now.")] = True,
) -> None:
    """Edit a fault pattern (the change survives later seed updates)."""
    p = kbstore.get_pattern(pattern_id, kb=kb)
    if p is None:
        raise KBError(f"no pattern {pattern_id!r}")
    changes: dict[str, Any] = {}
    for key, val in (("title", title), ("action", action), ("description", description), ("kind", kind)):
        if val is not None:
            changes[key] = val
    if category is not None:
        changes["category"] = category.value
    inds = list(p["indicators"])
    for r in remove_indicator or []:
        if r.isdigit() and 1 <= int(r) <= len(p["indicators"]):
            target = p["indicators"][int(r) - 1]
        else:
            target = r
        if target not in inds:
            raise KBError(f"pattern {pattern_id} has no indicator {r!r}")
        inds.remove(target)
    inds += add_indicator or []
    if inds != p["indicators"]:
        changes["indicators"] = inds
    codes = [c for c in p["codes"] if c not in set(remove_code or [])] + list(add_code or [])
    if codes != p["codes"]:
        changes["codes"] = codes
    if add_source:
        changes["sources"] = p["sources"] + list(add_source)
    if not changes:
        raise KBError("nothing to change (see 'l4 kb edit --help')")
    kbstore.update_pattern(pattern_id, changes, kb=kb)
    if embed:
        from l4.rootcause import ensure_embeddings

        ensure_embeddings(kb)
    typer.echo(f"updated {pattern_id}: {', '.join(sorted(changes))}")


def kb_export(
    kb: KbOption = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="File to write (default stdout).")] = None,
) -> None:
    """Export patterns, diagnoses and normal pools as JSON."""
    doc = kbstore.export_kb(kb=kb)
    text = json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    if output is None:
        sys.stdout.write(text)
        return
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(output)  # never leave a half-written export behind
    typer.echo(f"exported {len(doc['patterns'])} patterns, {len(doc['diagnoses'])} diagnoses to {output}", err=True)


def kb_import(
    file: Annotated[Path, typer.Argument(help="JSON written by 'l4 kb export'.")],
    kb: KbOption = None,
    replace: Annotated[bool, typer.Option("--replace", help="Empty the knowledge base first.")] = False,
) -> None:
    """Import an export (same ids are replaced; all or nothing)."""
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise KBError(f"{file} is not valid JSON: {exc}") from exc
    counts = kbstore.import_kb(doc, kb=kb, replace=replace)
    typer.echo(f"imported {counts['patterns']} patterns, {counts['diagnoses']} diagnoses, "
               f"{counts['normal_rows']} normal-pool rows")


def kb_backup(
    file: Annotated[Path, typer.Argument(help="Where to write the backup (a DuckDB file).")],
    kb: KbOption = None,
) -> None:
    """Copy the knowledge base to FILE, consistently, checked, replaced atomically."""
    rep = kbstore.backup_kb(file, kb=kb)
    c = rep["counts"]
    typer.echo(f"backed up {kbstore.resolve_kb(kb)} to {file}: {c.get('patterns', 0)} patterns, "
               f"{c.get('diagnoses', 0)} diagnoses, {c.get('normal_rows', 0)} normal-pool rows; "
               f"restore with: cp {file} {kbstore.resolve_kb(kb)}")


def kb_check(
    kb: KbOption = None,
    fmt: Annotated[Fmt, typer.Option("--format", "-f")] = Fmt.text,
) -> None:
    """Read every row of the knowledge base; exit 1 if anything is damaged."""
    rep = kbstore.check_kb(kb=kb)
    if fmt == Fmt.json:
        _print_json(rep)
    elif rep["ok"]:
        c = rep["counts"]
        typer.echo(f"{rep['kb']}: ok (schema {rep['schema_version']}; "
                   f"{c.get('patterns', 0)} patterns, {c.get('diagnoses', 0)} diagnoses, "
                   f"{c.get('normal_rows', 0)} normal-pool rows)")
    if not rep["ok"]:
        _fail("; ".join(rep["problems"]))


def _read_lines(file: Path) -> list[str]:
    if str(file) == "-":
        return sys.stdin.read().splitlines()
    if not file.is_file():
        raise KBError(f"no such file: {file}")
    raw = file.read_bytes()
    if file.suffix == ".gz":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace").splitlines()


def kb_match(
    file: Annotated[Path, typer.Argument(help="File with log lines ('-' for stdin, .gz ok).")],
    kb: KbOption = None,
    top: Annotated[int, typer.Option(help="At most this many root causes.")] = 3,
    fmt: Annotated[Fmt, typer.Option("--format", help="text or json")] = Fmt.text,
) -> None:
    """Match log lines against the fault patterns: {"root_causes": [...], "categories": [...]}."""
    from l4.category import format_category
    from l4.rootcause import NO_MATCH, match_lines_full

    match = match_lines_full(_read_lines(file), kb=kb, top_k=max(top, 1))
    res = match.root_causes
    if fmt == Fmt.json:
        _print_json({"root_causes": res, "categories": match.categories})
        return
    typer.echo(format_category(match.categories) or "category: unknown")
    if not res:
        typer.echo(NO_MATCH)
        return
    for i, r in enumerate(res, 1):
        typer.echo(f"{i}. {r['pattern_id']}  [{r['category']}]  similarity {r['similarity']:.2f}")
        typer.echo(f"   {r['title']}")
        typer.echo(f"   action: {r['action']}")
        for e in r["evidence"]:
            what = e.get("code") or e.get("indicator") or ", ".join(e.get("tokens") or [])
            typer.echo(f"   evidence ({e['kind']}): {str(what)[:100]}  <- {str(e.get('text', ''))[:100]}")


def register(app: typer.Typer) -> None:
    """Attach inbox/show/confirm/reject and the ``kb`` sub-app to the main CLI."""
    app.command("inbox")(inbox)
    app.command("show")(show)
    app.command("confirm")(confirm)
    app.command("reject")(reject)
    kb_app = typer.Typer(help="The fault-pattern knowledge base.", no_args_is_help=True)
    for name, fn in (("list", kb_list), ("show", kb_show), ("search", kb_search), ("add", kb_add),
                     ("edit", kb_edit), ("export", kb_export), ("import", kb_import),
                     ("match", kb_match), ("backup", kb_backup), ("check", kb_check)):
        kb_app.command(name)(_guard(fn))
    app.add_typer(kb_app, name="kb")
