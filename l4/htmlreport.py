"""One self-contained HTML file for a diagnosis: verdict, node x time chart, iteration chart,
stage timeline, events table, footer.

Pure: a report dict (``l4.report`` contract, with its ``charts`` field from
``l4.chartdata``) in, an HTML string out.  The charts are static SVG drawn here, in Python:
the file needs no script, no font and no network, so it opens anywhere (a ticket, a chat,
a laptop offline), stays small (a 256-node job is tens of KB) and a page that runs no
script cannot be made to run one by a log line.  Every string that comes from a log, a file
name or ``job.json`` goes through :func:`esc`; the page's Content-Security-Policy forbids
scripts and any network access as a second line of defence.
"""

from __future__ import annotations

import datetime as dt
import html
import math
import os
import tempfile
from pathlib import Path

from l4.report import _why

W = 1040  # drawing width of every chart (px); the page scales it down on narrow screens
LABEL_W = 215
KIND_COLOR = {1: "#8a9bb5", 2: "#e8902a", 3: "#d62728"}  # unusual, symptom, indicator
KIND_NAME = {1: "other unusual event", 2: "symptom (timeouts, resets)", 3: "failure indicator"}
STAGE_COLOR = {
    "initialization": "#9ecae1", "data_loading": "#a1d99b", "model_loading": "#c7b3e5",
    "training": "#6baed6", "checkpointing": "#fdd0a2", "evaluation": "#fdae6b",
    "finalization": "#bdbdbd",
}
MAX_TEXT = 1000
MAX_CONTEXT = 60
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


def esc(value: object) -> str:
    """Text for HTML/SVG, quotes included (safe in element content and attribute values)."""
    return html.escape("" if value is None else str(value), quote=True)


def _clip(value: object, limit: int = MAX_TEXT) -> str:
    s = "" if value is None else str(value)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _num(value: object, default: float = 0.0) -> float:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default
    return x if math.isfinite(x) else default


def version() -> str:
    try:
        from importlib.metadata import version as v

        return v("l4")
    except Exception:  # noqa: BLE001 - a source checkout without metadata
        return "unknown"


# ---------------------------------------------------------------------------------------
# the page


def render_html(report: dict, *, diagnosis: dict | None = None) -> str:
    """The whole page.  ``diagnosis``: the stored row (``l4 show``) for status and dates."""
    rep = report if isinstance(report, dict) else {}
    charts = rep.get("charts") if isinstance(rep.get("charts"), dict) else {}
    job = esc(rep.get("job_id"))
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>l4 diagnosis: job {job}</title>",
        f"<style>{_CSS}</style></head><body>",
        _header(rep, diagnosis),
        _verdict(rep, diagnosis),
        _section("Nodes over time", _timeline(charts.get("timeline")), "timeline"),
        _section("Iterations", _iterations(charts.get("iterations")), "iterations"),
        _section("Stages", _stages(charts.get("stages"), rep.get("stage"),
                                   str((charts.get("timeline") or {}).get("clock") or "log")), "stages"),
        _section("Most suspicious nodes", _node_table(rep), "nodes"),
        _section("Failure-indicating events", _events(rep), "events"),
        _footer(rep),
        "</body></html>",
    ]
    return "\n".join(parts)


def write_html(report: dict, path: str | Path, *, diagnosis: dict | None = None) -> Path:
    """Render and write atomically (a reader never sees half a file); returns the path."""
    out = Path(path)
    text = render_html(report, diagnosis=diagnosis)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".l4-report-", suffix=".html", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def check_writable(path: str | Path) -> str | None:
    """Why ``path`` cannot take the report (checked before a long diagnosis), or ``None``."""
    p = Path(path)
    if p.is_dir():
        return f"{p} is a directory; give a file name such as {p / 'report.html'}"
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        return f"cannot write {p}: directory {parent} does not exist"
    if not os.access(parent, os.W_OK):
        return f"cannot write {p}: directory {parent} is not writable"
    if p.exists() and not os.access(p, os.W_OK):
        return f"cannot write {p}: file is not writable"
    return None


def _section(title: str, body: str, anchor: str) -> str:
    return f'<section id="{anchor}"><h2>{esc(title)}</h2>{body}</section>'


def _header(rep: dict, diagnosis: dict | None) -> str:
    stats = rep.get("stats") or {}
    bits = [
        f"config <b>{esc(rep.get('config_id') or '-')}</b>",
        f"framework <b>{esc(rep.get('framework') or '-')}</b>",
        f"<b>{esc(stats.get('nodes', '?'))}</b> nodes",
        f"<b>{esc(stats.get('lines', '?'))}</b> lines",
    ]
    if rep.get("diagnosis_id"):
        bits.append(f"diagnosis <code>{esc(rep['diagnosis_id'])}</code>")
    if diagnosis:
        bits.append(f"status <b>{esc(diagnosis.get('status'))}</b>")
        if diagnosis.get("created_at"):
            bits.append(f"recorded {esc(str(diagnosis['created_at'])[:19])} UTC")
    return (f"<header><h1>l4 diagnosis &middot; job {esc(rep.get('job_id'))}</h1>"
            f"<p class=meta>{' &middot; '.join(bits)}</p></header>")


def culprits(rep: dict) -> list[dict]:
    """The top node, plus any node scoring close to it (several culprits of one fault)."""
    nodes = [n for n in rep.get("nodes") or [] if isinstance(n, dict)]
    if not nodes:
        return []
    top = _num(nodes[0].get("score"))
    return [nodes[0]] + [n for n in nodes[1:4] if top > 0 and _num(n.get("score")) >= 0.8 * top]


def _verdict(rep: dict, diagnosis: dict | None = None) -> str:
    rows = []
    cul = culprits(rep)
    if cul:
        items = []
        for n in cul:
            why = _why(n.get("evidence") or {}) or "highest anomaly score"
            items.append(f"<span class=culprit>{esc(n.get('node'))}</span> "
                         f"<span class=score>score {_num(n.get('score')):.2f}</span>"
                         f"<div class=why>why: {esc(why)}</div>")
        rows.append(("Culprit" + ("s" if len(cul) > 1 else ""), "".join(items)))
    else:
        rows.append(("Culprit", "no node stands out"))
    rows.append(("Stage", f"<b>{esc(rep.get('stage') or 'unknown')}</b>"))
    its = [i for i in rep.get("iterations") or [] if isinstance(i, dict)]
    if its:
        more = ", ".join(esc(i.get("iteration")) for i in its[1:5])
        rows.append(("Iteration", f"<b>{esc(its[0].get('iteration'))}</b>"
                     + (f" <span class=dim>(also suspicious: {more})</span>" if more else "")))
    else:
        rows.append(("Iteration", "<span class=dim>none found</span>"))
    events = [e for e in rep.get("events") or [] if isinstance(e, dict)]
    if events:
        # the first event whose example reads as what happened (not a bare traceback header)
        e = next((x for x in events[:5] if not str(((x.get("examples") or [{}])[0] or {})
                                                    .get("text", "")).strip().startswith("Traceback")),
                 events[0])
        ex = (e.get("examples") or [{}])[0] or {}
        where = f"{ex.get('file')}:{ex.get('line')}" if ex.get("file") else ""
        rows.append(("First evidence", f"<code class=tpl>{esc(_clip(_telling(ex, e), 300))}</code>"
                     + (f" <span class=where>{esc(where)}</span>" if where else "")))
    rows.append(("Root cause", _root_cause(rep, diagnosis)))
    body = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<section class=verdict id="verdict"><h2>Verdict</h2><table>{body}</table></section>'


def _telling(ex: dict, event: dict) -> str:
    """The line of an example that says what happened: for a traceback, its last line (the
    exception), not "Traceback (most recent call last):"."""
    text = str(ex.get("text") or event.get("template") or "")
    ctx = [str(c).strip() for c in ex.get("context") or [] if str(c).strip()]
    if text.strip().startswith("Traceback") and ctx:
        return f"{ctx[-1]}  (traceback)"
    return text


def _root_cause(rep: dict, diagnosis: dict | None = None) -> str:
    causes = [c for c in rep.get("root_causes") or [] if isinstance(c, dict)]
    did = rep.get("diagnosis_id")
    if causes:
        best = causes[0]
        out = (f"<b>{esc(best.get('title'))}</b> <span class=tag>{esc(best.get('category'))}</span> "
               f"<span class=score>similarity {_num(best.get('similarity')):.2f}</span> "
               f"<span class=dim>pattern {esc(best.get('pattern_id'))}</span>")
        if best.get("action"):
            out += f"<div class=action>action: {esc(_clip(best['action'], 600))}</div>"
        others = causes[1:3]
        if others:
            out += "<div class=dim>other candidates: " + "; ".join(
                f"{esc(c.get('title'))} ({_num(c.get('similarity')):.2f})" for c in others) + "</div>"
        pid = best.get("pattern_id") or "PATTERN_ID"
    else:
        status = rep.get("root_causes_status") or (
            "not matched (run without the knowledge base)" if "root_causes_status" not in rep
            else "no known pattern")
        out = f"<span class=dim>{esc(status)}</span>"
        pid = "PATTERN_ID"
    status = (diagnosis or {}).get("status")
    if status == "confirmed":
        out += (f"<div class=cmd>confirmed as <b>{esc(diagnosis.get('pattern_id'))}</b> by "
                f"{esc(diagnosis.get('decided_by'))}</div>")
    elif status == "rejected":
        out += (f"<div class=cmd>rejected by {esc(diagnosis.get('decided_by'))}: "
                f"{esc(diagnosis.get('reason'))}</div>")
    elif did:
        out += (f"<div class=cmd>confirm: <code>l4 confirm {esc(did)} --pattern {esc(pid)}</code>"
                f" &nbsp;or&nbsp; <code>l4 confirm {esc(did)} --new --title ... --category ... "
                f"--action ...</code></div>")
    else:
        out += "<div class=dim>not recorded in a knowledge base, so nothing to confirm</div>"
    return out


# ---------------------------------------------------------------------------------------
# charts


def _svg(height: float, body: str, label: str) -> str:
    return (f'<svg class=chart role="img" aria-label="{esc(label)}" viewBox="0 0 {W} {height:.0f}" '
            f'width="{W}" height="{height:.0f}" xmlns="http://www.w3.org/2000/svg">{body}</svg>')


def _ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    if not hi > lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    out, x = [], first
    while x <= hi + 1e-9:
        out.append(x)
        x += step
    return out


def _clock_label(t0: float, rel: float, clock: str, span: float) -> str:
    if clock == "log":
        return f"{rel * 100:.0f}%"
    if t0 > 1e8:  # an epoch time: show the clock
        when = dt.datetime.fromtimestamp(t0 + rel, dt.UTC)
        return when.strftime("%H:%M:%S" if span < 86400 else "%m-%d %H:%M")
    return f"+{rel:.0f}s"


def _duration(seconds: float) -> str:
    s = abs(seconds)
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _timeline(tl: object) -> str:
    if not isinstance(tl, dict) or not tl.get("nodes"):
        return "<p class=dim>No timing data stored with this diagnosis.</p>"
    rows = [r for r in tl["nodes"] if isinstance(r, dict)]
    rest = tl.get("rest") if isinstance(tl.get("rest"), dict) else None
    clock = str(tl.get("clock") or "wall")
    span = max(_num(tl.get("span"), 1.0), 1e-9)
    bins = max(int(_num(tl.get("bins"), 160)), 1)
    t0 = _num(tl.get("t0"))
    row_h, top, x0 = 17, 30, LABEL_W
    plot_w = W - x0 - 20
    n_rows = len(rows) + (1 if rest else 0)
    height = top + n_rows * row_h + 46

    def x(rel: float) -> float:
        return x0 + max(0.0, min(1.0, rel / span)) * plot_w

    bw = plot_w / bins
    g = [f'<rect x="{x0}" y="{top - 4}" width="{plot_w}" height="{n_rows * row_h + 8}" class=plotbg />']
    for t in _ticks(0.0, span):
        xx = x(t)
        g.append(f'<line x1="{xx:.1f}" y1="{top - 4}" x2="{xx:.1f}" y2="{top + n_rows * row_h + 4}" class=grid />')
        g.append(f'<text x="{xx:.1f}" y="{top + n_rows * row_h + 18}" class=tick text-anchor="middle">'
                 f"{esc(_clock_label(t0, t, clock, span))}</text>")
    for i, r in enumerate(rows):
        y = top + i * row_h
        cul = bool(r.get("culprit"))
        if cul:
            g.append(f'<rect x="0" y="{y}" width="{W}" height="{row_h}" class=culpritrow />')
        start, stop = _num(r.get("start")), _num(r.get("stop"), span)
        g.append(f'<rect x="{x(start):.1f}" y="{y + 6}" width="{max(x(stop) - x(start), 1):.1f}" '
                 f'height="5" class=alive><title>{esc(r.get("node"))}: logging</title></rect>')
        label = ("\u25b6 " if cul else "") + _clip(r.get("node"), 25)
        g.append(f'<text x="{x0 - 8}" y="{y + 12.5}" text-anchor="end" class="{"clabel" if cul else "nlabel"}">'
                 f"{esc(label)}</text>")
        for m in r.get("marks") or []:
            try:
                k, cnt, kind = int(m[0]), int(m[1]), int(m[2])
            except (TypeError, ValueError, IndexError):
                continue
            op = min(1.0, 0.35 + 0.2 * math.log10(max(cnt, 1)) + 0.15)
            g.append(f'<rect x="{x0 + k * bw:.1f}" y="{y + 2}" width="{max(bw, 1.5):.1f}" height="{row_h - 4}" '
                     f'fill="{KIND_COLOR.get(kind, "#888")}" fill-opacity="{op:.2f}">'
                     f"<title>{esc(r.get('node'))}: {cnt} {esc(KIND_NAME.get(kind, 'event'))} line(s)</title></rect>")
        fa = r.get("first_anomaly")
        if fa is not None:
            xx = x(_num(fa))
            g.append(f'<path d="M{xx:.1f} {y + 1} l4 -0 l-4 7 l-4 -7 z" class=first>'
                     f"<title>{esc(r.get('node'))}: first unusual event, line {esc(r.get('first_anomaly_line'))}"
                     "</title></path>")
        xs = x(stop)
        g.append(f'<line x1="{xs:.1f}" y1="{y + 2}" x2="{xs:.1f}" y2="{y + row_h - 2}" class=stop />')
    if rest:
        y = top + len(rows) * row_h
        n = max(int(_num(rest.get("n"), 1)), 1)
        g.append(f'<text x="{x0 - 8}" y="{y + 12.5}" text-anchor="end" class=nlabel>'
                 f"{n} other nodes</text>")
        for b in rest.get("bins") or []:
            try:
                k, nodes, cnt = int(b[0]), int(b[1]), int(b[2])
            except (TypeError, ValueError, IndexError):
                continue
            g.append(f'<rect x="{x0 + k * bw:.1f}" y="{y + 2}" width="{max(bw, 1.5):.1f}" height="{row_h - 4}" '
                     f'fill="#e8902a" fill-opacity="{0.15 + 0.85 * nodes / n:.2f}">'
                     f"<title>{nodes} of {n} other nodes, {cnt} unusual lines</title></rect>")
        stop3 = rest.get("stop")
        if isinstance(stop3, list) and len(stop3) == 3 and stop3[0] is not None:
            a, b2 = x(_num(stop3[0])), x(_num(stop3[2]))
            g.append(f'<rect x="{a:.1f}" y="{y + 12}" width="{max(b2 - a, 1.5):.1f}" height="3" class=stoprange>'
                     "<title>when the other nodes stopped (first to last)</title></rect>")
    xj = x(_num(tl.get("job_stop"), span))
    g.append(f'<line x1="{xj:.1f}" y1="{top - 10}" x2="{xj:.1f}" y2="{top + n_rows * row_h + 4}" class=jobstop />')
    g.append(f'<text x="{xj - 4:.1f}" y="{top - 12}" text-anchor="end" class=stoplabel>job stopped</text>')
    g.append(f'<text x="{x0}" y="{top - 12}" class=axis>'
             f'{"share of each node&#8217;s log" if clock == "log" else "time (as logged)"}</text>')
    svg = _svg(height, "".join(g), "node by time chart")
    legend = (
        '<div class=legend>'
        + "".join(f'<span><i style="background:{KIND_COLOR[k]}"></i>{esc(KIND_NAME[k])}</span>' for k in (3, 2, 1))
        + '<span><i class=lfirst></i>first unusual event of the node</span>'
        '<span><i class=lstop></i>node stopped logging</span>'
        '<span><i class=ljob></i>job stopped</span></div>'
    )
    shown = len(rows)
    total = int(_num(tl.get("n_nodes"), shown))
    notes = []
    if clock == "progress":
        notes.append(f"<b>Times are aligned by training progress, not by clock</b>: node clocks disagree by "
                     f"up to {_duration(_num(tl.get('skew_s')))}, so each node's times are shifted onto a "
                     "common clock using the iteration numbers every node prints.")
    elif clock == "log":
        notes.append("<b>Aligned by progress, not by clock</b>: not every node&#8217;s log carries a clock "
                     "l4 can read, so the axis is each node&#8217;s position in its own log (0% is its first "
                     "line, 100% its last).")
    else:
        notes.append("Times are the nodes&#8217; own clocks (they agree to within a few seconds).")
    if total > shown:
        notes.append(f"The {shown} most suspicious of {total} nodes are shown one per row; the other "
                     f"{total - shown} are summarised in the last row (shade: how many of them logged "
                     "unusual events; bar: when they stopped).")
    cs = tl.get("culprit_stop")
    if cs is not None and clock != "log":
        gap = _num(tl.get("job_stop")) - _num(cs)
        if gap > 1:
            notes.append(f"The culprit stopped logging {_duration(gap)} before the job stopped.")
    return legend + f'<div class=scroll>{svg}</div><p class=note>{" ".join(notes)}</p>'


def _iterations(it: object) -> str:
    if not isinstance(it, dict) or not it.get("points"):
        return "<p class=dim>No iteration counter found in the logs, so there is nothing to plot.</p>"
    pts = []
    for p in it["points"]:
        try:
            pts.append((float(p[0]), _num(p[1], math.nan), None if p[2] is None else _num(p[2], math.nan)))
        except (TypeError, ValueError, IndexError):
            continue
    if not pts:
        return "<p class=dim>No iteration data.</p>"
    unit = "s" if it.get("unit") == "s" else "records"
    band = it.get("healthy") if isinstance(it.get("healthy"), list) and len(it["healthy"]) == 3 else None
    susp = [int(_num(s)) for s in it.get("suspicious") or []]
    failure = it.get("failure")
    lo_x = min(p[0] for p in pts)
    hi_x = max([p[0] for p in pts] + [_num(failure, lo_x)] + [float(s) for s in susp])
    if hi_x <= lo_x:
        hi_x = lo_x + 1
    ys = [v for p in pts for v in (p[1], p[2]) if v is not None and math.isfinite(v)]
    if band:
        ys += [_num(band[2])]
    hi_y = max(ys + [1e-9]) * 1.1
    x0, top, ph = 70, 24, 220
    pw = W - x0 - 30
    height = top + ph + 48

    def X(v: float) -> float:
        return x0 + (v - lo_x) / (hi_x - lo_x) * pw

    def Y(v: float) -> float:
        return top + ph - max(0.0, min(v, hi_y)) / hi_y * ph

    g = [f'<rect x="{x0}" y="{top}" width="{pw}" height="{ph}" class=plotbg />']
    for t in _ticks(0, hi_y, 5):
        g.append(f'<line x1="{x0}" y1="{Y(t):.1f}" x2="{x0 + pw}" y2="{Y(t):.1f}" class=grid />'
                 f'<text x="{x0 - 6}" y="{Y(t) + 4:.1f}" text-anchor="end" class=tick>{t:g}</text>')
    for t in _ticks(lo_x, hi_x, 8):
        g.append(f'<text x="{X(t):.1f}" y="{top + ph + 16}" text-anchor="middle" class=tick>{t:.0f}</text>')
    if band:
        a, b = Y(_num(band[2])), Y(_num(band[0]))
        g.append(f'<rect x="{x0}" y="{a:.1f}" width="{pw}" height="{max(b - a, 1.5):.1f}" class=band>'
                 f"<title>healthy runs: {_num(band[0]):.2f}-{_num(band[2]):.2f} s per iteration "
                 "(10th-90th percentile)</title></rect>")
    for s in susp:
        g.append(f'<line x1="{X(s):.1f}" y1="{top}" x2="{X(s):.1f}" y2="{top + ph}" class=susp>'
                 f"<title>suspicious iteration {s}</title></line>")
    med = " ".join(f"{X(p[0]):.1f},{Y(p[1]):.1f}" for p in pts if math.isfinite(p[1]))
    g.append(f'<polyline points="{med}" class=median />')
    own = " ".join(f"{X(p[0]):.1f},{Y(p[2]):.1f}" for p in pts if p[2] is not None and math.isfinite(p[2]))
    if own:
        g.append(f'<polyline points="{own}" class=own />')
    if failure is not None:
        xf = X(_num(failure))
        g.append(f'<line x1="{xf:.1f}" y1="{top - 6}" x2="{xf:.1f}" y2="{top + ph}" class=failure />'
                 f'<text x="{xf - 4:.1f}" y="{top - 9}" text-anchor="end" class=stoplabel>'
                 f"failure: iteration {esc(failure)}</text>")
    g.append(f'<text x="{x0}" y="{top - 9}" class=axis>'
             f'{"seconds per iteration" if unit == "s" else "log records per iteration"}</text>'
             f'<text x="{x0 + pw}" y="{top + ph + 36}" text-anchor="end" class=axis>iteration</text>')
    legend = (
        '<div class=legend><span><i class=lmed></i>median over nodes</span>'
        + (f'<span><i class=lown></i>culprit {esc(it.get("culprit"))}</span>' if own else "")
        + '<span><i class=lsusp></i>suspicious iteration</span><span><i class=ljob></i>failure point</span>'
        + ('<span><i class=lband></i>healthy runs (10th-90th percentile)</span>' if band else "")
        + "</div>"
    )
    note = ("No clock in these logs: the height is the number of log records between two iteration "
            "lines, a proxy for how much each iteration did." if unit != "s" else "")
    if not band and unit == "s":
        note = "No healthy baseline with the same iteration line, so no healthy band is drawn."
    if not own:
        note += (f" The culprit {esc(it.get('culprit'))} printed no iteration lines of its own; the "
                 "line is the median over the nodes that did.")
    return legend + f'<div class=scroll>{_svg(height, "".join(g), "iteration chart")}</div>' + (
        f"<p class=note>{note}</p>" if note else "")


def _stages(st: object, final: object, clock: str = "log") -> str:
    final_s = esc(final or "unknown")
    if not isinstance(st, dict) or not st.get("segments"):
        return f"<p>The job stopped in <b>{final_s}</b>. <span class=dim>No stage timeline stored.</span></p>"
    segs = [s for s in st["segments"] if isinstance(s, dict)]
    lo = min(_num(s.get("start")) for s in segs)
    hi = max(_num(s.get("end")) for s in segs)
    hi = hi if hi > lo else lo + 1
    x0, pw, y, h = 20, W - 40, 24, 30
    g = []
    for s in segs:
        a = x0 + (_num(s.get("start")) - lo) / (hi - lo) * pw
        b = x0 + (_num(s.get("end")) - lo) / (hi - lo) * pw
        name = str(s.get("stage"))
        g.append(f'<rect x="{a:.1f}" y="{y}" width="{max(b - a, 2):.1f}" height="{h}" '
                 f'fill="{STAGE_COLOR.get(name, "#ccc")}" stroke="#fff"><title>{esc(name)}</title></rect>')
        if b - a > 9 * len(name):
            g.append(f'<text x="{(a + b) / 2:.1f}" y="{y + 19}" text-anchor="middle" class=stagelabel>'
                     f"{esc(name.replace('_', ' '))}</text>")
    xe = x0 + pw
    g.append(f'<line x1="{xe}" y1="{y - 8}" x2="{xe}" y2="{y + h + 4}" class=failure />'
             f'<text x="{xe - 4}" y="{y - 10}" text-anchor="end" class=stoplabel>stopped in {final_s}</text>')
    seen = list(dict.fromkeys(str(s.get("stage")) for s in segs))
    legend = "<div class=legend>" + "".join(
        f'<span><i style="background:{STAGE_COLOR.get(n, "#ccc")}"></i>{esc(n.replace("_", " "))}</span>'
        for n in seen) + "</div>"
    last = str(segs[-1].get("stage"))
    who = "the culprit" if st.get("culprit", True) else "node"
    note = (f"Stages of {who} {esc(st.get('node'))}, from its own log lines"
            + (", on the time axis of the chart above." if clock != "log" else ", in log order."))
    if last != str(final):
        note += (f" Its last stage line reads {esc(last)}; l4 places the failure in <b>{final_s}</b> from "
                 "the error itself and what the other ranks announced.")
    return legend + f'<div class=scroll>{_svg(y + h + 12, "".join(g), "stage timeline")}</div><p class=note>{note}</p>'


# ---------------------------------------------------------------------------------------
# tables and footer


def _node_table(rep: dict, limit: int = 12) -> str:
    nodes = [n for n in rep.get("nodes") or [] if isinstance(n, dict)]
    if not nodes:
        return "<p class=dim>No nodes.</p>"
    keys = ("named", "named_by_peers", "specific", "slowed_first", "first_to_stop",
            "stopped_counting_first", "odd_measurements", "odd_in_symptom", "missing_symptom", "stopped_first", "iforest")
    head = "".join(f"<th>{esc(k.replace('_', ' '))}</th>" for k in keys)
    rows = []
    for i, n in enumerate(nodes[:limit], 1):
        ev = n.get("evidence") or {}
        cells = "".join(
            f'<td class=num style="background:rgba(214,39,40,{min(max(_num(ev.get(k)), 0), 1) * 0.45:.2f})">'
            f"{_num(ev.get(k)):.2f}</td>" for k in keys)
        rows.append(f"<tr><td class=num>{i}</td><td><code>{esc(n.get('node'))}</code></td>"
                    f"<td class=num>{_num(n.get('score')):.3f}</td>{cells}"
                    f"<td>{esc(_why(ev))}</td></tr>")
    more = f"<p class=dim>{len(nodes) - limit} more nodes not listed.</p>" if len(nodes) > limit else ""
    return (f"<table class=grid><tr><th>#</th><th>node</th><th>score</th>{head}<th>why</th></tr>"
            + "".join(rows) + "</table>" + more)


def _events(rep: dict) -> str:
    events = [e for e in rep.get("events") or [] if isinstance(e, dict)]
    if not events:
        return "<p class=dim>No event stands out.</p>"
    rows = []
    for i, e in enumerate(events, 1):
        nodes = [str(n) for n in e.get("nodes") or []]
        shown = ", ".join(esc(n) for n in nodes[:4]) + (f" +{len(nodes) - 4} more" if len(nodes) > 4 else "")
        exs = []
        examples = [ex for ex in e.get("examples") or [] if isinstance(ex, dict)]
        for j, ex in enumerate(examples):
            if j == 1:
                exs.append(f"<details><summary>{len(examples) - 1} more example(s)</summary>")
            ctx = [str(c) for c in ex.get("context") or []]
            fold = ""
            if ctx:
                body = "\n".join(_clip(c, 400) for c in ctx[:MAX_CONTEXT])
                if len(ctx) > MAX_CONTEXT:
                    body += f"\n... {len(ctx) - MAX_CONTEXT} more lines"
                fold = (f"<details><summary>traceback context ({len(ctx)} lines)</summary>"
                        f"<pre>{esc(body)}</pre></details>")
            exs.append(f"<div class=ex><span class=where>{esc(ex.get('file'))}:{esc(ex.get('line'))}</span>"
                       f"<pre class=line>{esc(_clip(ex.get('text')))}</pre>{fold}</div>")
        if len(examples) > 1:
            exs.append("</details>")
        kind = "symptom" if e.get("symptom") else "indicator"
        rows.append(
            f"<tr><td class=num>{i}</td><td><span class='tag {kind}'>{kind}</span>"
            f"<pre class=tpl>{esc(_clip(e.get('template')))}</pre></td>"
            f"<td>{shown}</td><td class=num>{esc(e.get('count'))}</td>"
            f"<td class=num>{_num(e.get('score')):.2f}</td><td>{''.join(exs)}</td></tr>")
    return ("<table class=grid><tr><th>#</th><th>template</th><th>nodes</th><th>count</th><th>score</th>"
            "<th>examples (file:line)</th></tr>" + "".join(rows) + "</table>")


def _footer(rep: dict) -> str:
    files = [f for f in rep.get("files") or [] if isinstance(f, dict)]
    bad = [f for f in files if f.get("status") not in ("ok", None)]
    parts = ["<footer><h2>Inputs and run</h2>"]
    if bad:
        parts.append("<p><b>Files not (fully) read:</b></p><ul>" + "".join(
            f"<li><code>{esc(f.get('file'))}</code>: {esc(f.get('status'))}"
            + (f" &mdash; {esc(f.get('error'))}" if f.get("error") else "") + "</li>" for f in bad) + "</ul>")
    rows = "".join(
        f"<tr><td><code>{esc(f.get('file'))}</code></td><td>{esc(f.get('node'))}</td>"
        f"<td class=num>{esc(f.get('lines'))}</td><td class=num>{esc(f.get('bytes'))}</td>"
        f"<td>{esc(f.get('status'))}</td><td>{esc(f.get('error') or '')}</td></tr>" for f in files)
    parts.append(f"<details{' open' if len(files) <= 16 else ''}><summary>{len(files)} input files</summary>"
                 "<table class=grid><tr><th>file</th><th>node</th><th>lines</th><th>bytes</th><th>status</th>"
                 f"<th>error</th></tr>{rows}</table></details>")
    base = rep.get("baseline") or {}
    if base.get("used"):
        src = ", ".join(str(j) for j in base.get("jobs") or [])
        if base.get("pool"):
            src = (src + " + " if src else "") + "stored normal pool"
        parts.append(f"<p>Baselines: {esc(src or 'stored normal pool')}</p>")
    else:
        parts.append("<p>Baselines: none used (within-job comparison only)</p>")
    timing = rep.get("timing") or {}
    if timing:
        parts.append("<p>Timings: " + ", ".join(f"{esc(k)} {esc(v)}" for k, v in timing.items()) + "</p>")
    warnings = [str(w) for w in rep.get("warnings") or []]
    if warnings:
        parts.append("<details><summary>" + f"{len(warnings)} warning(s)</summary><ul>"
                     + "".join(f"<li>{esc(_clip(w, 500))}</li>" for w in warnings[:50]) + "</ul></details>")
    parts.append(f"<p class=dim>l4 {esc(version())} &middot; report schema {esc(rep.get('schema', '?'))}"
                 f" &middot; rendered {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}"
                 " &middot; self-contained file: no script, no network</p></footer>")
    return "".join(parts)


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;margin:0 auto;
max-width:1100px;padding:14px 24px 40px;background:#fff}
h1{font-size:22px;margin:6px 0 2px}h2{font-size:16px;margin:22px 0 8px;border-bottom:1px solid #dde2ea;
padding-bottom:3px}
.meta{color:#556;margin:0}.dim{color:#6b7280}code,pre{font:12.5px/1.35 ui-monospace,Menlo,Consolas,monospace}
pre{margin:0;white-space:pre-wrap;word-break:break-all}
.verdict{background:#fff6f5;border:1px solid #f1c4bf;border-left:6px solid #d62728;border-radius:6px;
padding:4px 16px 10px;margin-top:12px}.verdict h2{border:0;margin:8px 0 4px}
.verdict table{border-collapse:collapse;width:100%}.verdict th{text-align:left;vertical-align:top;
width:130px;padding:5px 8px 5px 0;color:#7a1c1c}.verdict td{padding:5px 0}
.culprit{font:700 17px ui-monospace,Menlo,monospace;color:#b01717}.score{color:#444;margin-left:6px}
.why{color:#333;margin:1px 0 4px}.tag{display:inline-block;background:#eef1f6;border-radius:4px;
padding:0 6px;font-size:12px;color:#334}.tag.indicator{background:#fde2e1;color:#a11}
.tag.symptom{background:#fdebd3;color:#8a4b00}.action{margin-top:3px}.cmd{margin-top:5px}
.cmd code{background:#1d2330;color:#f5f7fa;padding:2px 6px;border-radius:4px}
.where{color:#3559a8;font:12px ui-monospace,monospace}code.tpl{background:#f3f4f7;padding:1px 4px}
.scroll{overflow-x:auto}svg.chart{max-width:100%;height:auto;display:block}
.plotbg{fill:#f7f8fa}.grid{stroke:#e3e6eb;stroke-width:1}.tick{font-size:11px;fill:#555}
.axis{font-size:11px;fill:#333;font-weight:600}.nlabel{font:11.5px ui-monospace,monospace;fill:#222}
.clabel{font:700 12px ui-monospace,monospace;fill:#b01717}.culpritrow{fill:#fde7e6}
.alive{fill:#cfd6e2}.first{fill:#111}.stop{stroke:#111;stroke-width:2}.stoprange{fill:#111;opacity:.55}
.jobstop{stroke:#d62728;stroke-width:2;stroke-dasharray:5 3}.stoplabel{font-size:11.5px;fill:#d62728;
font-weight:600}.band{fill:#2ca02c;opacity:.18}.susp{stroke:#e8902a;stroke-width:1.5;opacity:.8}
.median{fill:none;stroke:#5b6f91;stroke-width:1.5}.own{fill:none;stroke:#d62728;stroke-width:1.5}
.failure{stroke:#d62728;stroke-width:2;stroke-dasharray:5 3}.stagelabel{font-size:12px;fill:#1d2330}
.legend{font-size:12px;color:#333;margin:2px 0 4px}.legend span{margin-right:14px;white-space:nowrap}
.legend i{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:-1px}
.legend i.lfirst{width:0;height:0;border-left:5px solid transparent;border-right:5px solid transparent;
border-top:8px solid #111}.legend i.lstop{width:2px;background:#111}.legend i.ljob{width:0;
border-left:2px dashed #d62728}.legend i.lmed{height:2px;background:#5b6f91}.legend i.lown{height:2px;
background:#d62728}.legend i.lsusp{width:2px;background:#e8902a}.legend i.lband{background:#2ca02c;
opacity:.3}.note{font-size:12.5px;color:#374151;margin:4px 0}
table.grid{border-collapse:collapse;width:100%;font-size:13px}table.grid th,table.grid td{border:1px solid
#e3e6eb;padding:3px 6px;vertical-align:top;text-align:left}table.grid th{background:#f3f4f7}
td.num{text-align:right;font-variant-numeric:tabular-nums}table.grid td code{white-space:nowrap}.ex{margin-bottom:4px}
pre.line{background:#f7f8fa;padding:2px 4px}pre.tpl{font-size:12px}details summary{cursor:pointer;
color:#3559a8;font-size:12px}footer{margin-top:26px;font-size:12.5px;color:#333}
"""
