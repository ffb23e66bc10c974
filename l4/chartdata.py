"""What the HTML report's charts draw, as plain JSON-able data (the report's ``charts`` field).

The report contract carries scores and examples; a picture of a failure needs more: when each
node logged its unusual events, when it stopped, how long each iteration took and which
stage the culprit went through.  This module reads those from the parsed job and the
analysis results (it decides nothing about the diagnosis) and keeps them small enough to
store with every diagnosis, so ``l4 show ID --html`` can draw the same pictures later:

* ``timeline``: the job's span cut into ``BINS`` bins; per shown node (the most suspicious
  ``MAX_NODE_ROWS``) the bins where it logged unusual events, its first anomaly and its
  stop; the other nodes as one summary row.  Node clocks disagree by seconds, so when the
  iteration counter shows a skew the times are shifted onto one node's clock by the
  iteration numbers every node prints (``clock: "progress"``); without clocks at all the
  axis is each node's position in its own log (``clock: "log"``).
* ``iterations``: per iteration, the median duration over nodes and the culprit's own,
  downsampled to ``MAX_POINTS`` (keeping the slowest of each bucket so spikes survive).
* ``stages``: the culprit's stage segments, on the same axis as the timeline.
"""

from __future__ import annotations

import math

import numpy as np

from l4.crossjob import CrossJobResult
from l4.indicators import Indicator
from l4.merge import ParsedJob
from l4.profiles import EARLY, choose_profile
from l4.spatial import NodeScore

MAX_NODE_ROWS = 24
BINS = 160
MAX_POINTS = 600
#: node clocks closer than this are drawn as they are
SKEW_S = 2.0
#: a node's clock must reach this close (share of its records) to both ends of its log
COVER = 0.2
KIND_RANK = {"unusual": 1, "symptom": 2, "indicator": 3}


def _r(x: float, nd: int = 2) -> float | None:
    return round(float(x), nd) if x is not None and math.isfinite(x) else None


def marker_columns(job: ParsedJob, template: str | None) -> list[int]:
    """Event columns of the iteration counter the temporal analysis chose (by its text)."""
    if not template:
        return []
    return [c for c, t in enumerate(job.templates) if t == template]


def node_iterations(job: ParsedJob, r: int, cols: list[int]) -> tuple[np.ndarray, ...]:
    """(record positions, iteration numbers, clock times) of node ``r``'s counter lines,
    one per iteration (a number printed by several ranks keeps its last line)."""
    tracks = [job.markers[r][c] for c in cols if c in job.markers[r]]
    p = np.concatenate([np.zeros(0, np.int64)] + [t.positions for t in tracks]).astype(np.int64)
    n = np.concatenate([np.zeros(0)] + [t.numbers for t in tracks]).astype(np.float64)
    t = np.concatenate([np.zeros(0)] + [t.ts for t in tracks]).astype(np.float64)
    order = np.argsort(p, kind="stable")
    p, n, t = p[order], n[order], t[order]
    if len(n) > 1:
        keep = np.append(n[1:] != n[:-1], True)
        p, n, t = p[keep], n[keep], t[keep]
    return p, n, t


def _anchors(job: ParsedJob, r: int, cols: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Known (record position, clock time) points of node ``r``, for interpolation."""
    fp, ft = job.first_pos[r], job.first_ts[r]
    ok = (fp >= 0) & ~np.isnan(ft)
    pos = [fp[ok]]
    ts = [ft[ok]]
    p, _, t = node_iterations(job, r, cols)
    good = ~np.isnan(t)
    pos.append(p[good])
    ts.append(t[good])
    n_rec = len(job.seqs[r])
    for at, val in ((0, job.node_first_ts[r]), (max(n_rec - 1, 0), job.node_last_ts[r])):
        if math.isfinite(val):
            pos.append(np.array([at]))
            ts.append(np.array([val]))
    P = np.concatenate(pos).astype(np.float64)
    T = np.concatenate(ts).astype(np.float64)
    order = np.argsort(P, kind="stable")
    P, T = P[order], T[order]
    if len(T) > 1:  # a clock never runs backwards within one log
        T = np.maximum.accumulate(T)
    return P, T


def _covered(job: ParsedJob, r: int, P: np.ndarray, T: np.ndarray) -> bool:
    """Does node ``r``'s clock cover its log?  A log whose only times are in its last lines
    (a launcher's shutdown messages after an unclocked training log) would put its whole
    life at the end; such a node cannot be drawn on a clock axis."""
    n_rec = len(job.seqs[r])
    if len(T) < 2 or not T[-1] > T[0] or n_rec < 2:
        return False
    return P[0] <= COVER * n_rec and P[-1] >= (1 - COVER) * (n_rec - 1)


def clock_offsets(job: ParsedJob, cols: list[int]) -> dict[int, float]:
    """Per node, how far its clock runs ahead of the others', from the times at which each
    node printed the same iteration numbers (median difference to the per-number median)."""
    per: dict[int, dict[float, float]] = {}
    for r in range(job.n_nodes):
        _, n, t = node_iterations(job, r, cols)
        ok = ~np.isnan(n) & ~np.isnan(t)
        if ok.sum() >= 3:
            per[r] = dict(zip(n[ok].tolist(), t[ok].tolist(), strict=True))
    if len(per) < 2:
        return {}
    by_num: dict[float, list[float]] = {}
    for d in per.values():
        for k, v in d.items():
            by_num.setdefault(k, []).append(v)
    ref = {k: float(np.median(v)) for k, v in by_num.items() if len(v) >= 2}
    out = {}
    for r, d in per.items():
        diffs = [v - ref[k] for k, v in d.items() if k in ref]
        if diffs:
            out[r] = float(np.median(diffs))
    return out


def build_charts(job: ParsedJob, cross: CrossJobResult, ranked: list[NodeScore],
                 marker_template: str | None, stage: str, iterations: list[tuple[int, float]],
                 events: list[Indicator]) -> dict:
    """The ``charts`` field of the report (see module docstring)."""
    if not ranked or job.n_nodes == 0:
        return {}
    cols = marker_columns(job, marker_template)
    row = {n: i for i, n in enumerate(job.nodes)}
    culprit = row[ranked[0].node]
    anchors = [_anchors(job, r, cols) for r in range(job.n_nodes)]
    timed = [_covered(job, r, *anchors[r]) for r in range(job.n_nodes)]
    shown = [row[s.node] for s in ranked[:MAX_NODE_ROWS]]
    offsets: dict[int, float] = {}
    if all(timed[r] for r in shown) and sum(timed) >= max(1, job.n_nodes // 2):
        offsets = clock_offsets(job, cols)
        skew = max((abs(v) for v in offsets.values()), default=0.0)
        clock = "progress" if skew > SKEW_S else "wall"
        if clock == "wall":
            offsets = {}
    else:
        clock, skew = "log", 0.0  # some shown node has no clock l4 can read

    def times(r: int, pos: np.ndarray) -> np.ndarray:
        if clock == "log":
            return pos.astype(np.float64) / max(len(job.seqs[r]) - 1, 1)
        P, T = anchors[r]
        if not timed[r]:
            return np.full(len(pos), math.nan)
        return np.interp(pos.astype(np.float64), P, T) - offsets.get(r, 0.0)

    starts, stops = np.full(job.n_nodes, math.nan), np.full(job.n_nodes, math.nan)
    for r in range(job.n_nodes):
        n_rec = len(job.seqs[r])
        if n_rec:
            se = times(r, np.array([0, n_rec - 1]))
            starts[r], stops[r] = se[0], se[1]
    if np.isnan(starts).all():
        return {}
    t0, t1 = float(np.nanmin(starts)), float(np.nanmax(stops))
    if not t1 > t0:
        t1 = t0 + 1.0
    width = (t1 - t0) / BINS

    kind_of: dict[int, str] = {}
    for e in events:
        c = job.column(int(e.event_id))
        if c is not None:
            kind_of[c] = "symptom" if e.symptom else "indicator"
    # unusual on the node, or one of the report's events (the timeouts every victim logs
    # are no anomaly within the job, but they are the pile-up the chart must show)
    unusual = cross.anomalous & cross.kept[None, :]
    if kind_of:
        listed = np.zeros(job.n_events, bool)
        listed[list(kind_of)] = True
        unusual = unusual | (listed[None, :] & (job.counts > 0))

    def node_marks(r: int) -> tuple[list, float | None, int | None]:
        ucols = np.nonzero(unusual[r])[0]
        if not len(ucols) or not len(job.seqs[r]):
            return [], None, None
        seq = job.seqs[r]
        hit = np.nonzero(np.isin(seq, ucols.astype(seq.dtype)))[0]
        if not len(hit):
            return [], None, None
        t = times(r, hit)
        clocked = ~np.isnan(t)  # a node without a clock of its own has no place on the axis
        if not clocked.any():
            return [], None, None
        t, hit = t[clocked], hit[clocked]
        b = np.clip(((t - t0) / width).astype(np.int64), 0, BINS - 1)
        ranks = np.array([KIND_RANK[kind_of.get(int(c), "unusual")] for c in seq[hit]])
        marks = []
        for k in np.unique(b).tolist():
            sel = b == k
            marks.append([k, int(sel.sum()), int(ranks[sel].max())])
        first = int(np.argmin(job.first_pos[r, ucols] + (job.first_pos[r, ucols] < 0) * 2**62))
        c0 = int(ucols[first])
        return marks, _r(float(times(r, np.array([job.first_pos[r, c0]]))[0]) - t0, 3), \
            int(job.first_line[r, c0])

    rows = []
    for s in ranked[:MAX_NODE_ROWS]:
        r = row[s.node]
        marks, first, first_line = node_marks(r)
        rows.append({
            "node": s.node, "score": _r(s.score, 4), "culprit": r == culprit,
            "start": _r(starts[r] - t0, 3), "stop": _r(stops[r] - t0, 3),
            "first_anomaly": first, "first_anomaly_line": first_line, "marks": marks,
            "offset_s": _r(offsets.get(r, 0.0), 2), "file": job.files[r],
        })
    rest_idx = [row[s.node] for s in ranked[MAX_NODE_ROWS:]]
    rest = None
    if rest_idx:
        nodes_per_bin = np.zeros(BINS, np.int64)
        count_per_bin = np.zeros(BINS, np.int64)
        firsts = []
        for r in rest_idx:
            marks, first, _ = node_marks(r)
            for k, cnt, _kind in marks:
                nodes_per_bin[k] += 1
                count_per_bin[k] += cnt
            if first is not None:
                firsts.append(first)
        st = stops[rest_idx] - t0
        st = st[~np.isnan(st)]
        rest = {
            "n": len(rest_idx),
            "bins": [[k, int(nodes_per_bin[k]), int(count_per_bin[k])]
                     for k in np.nonzero(nodes_per_bin)[0].tolist()],
            "stop": [_r(float(np.min(st)), 3), _r(float(np.median(st)), 3),
                     _r(float(np.max(st)), 3)] if len(st) else None,
            "first_anomaly": [_r(min(firsts), 3), _r(float(np.median(firsts)), 3),
                              _r(max(firsts), 3)] if firsts else None,
            "with_anomaly": len(firsts),
        }
    # the stage timeline follows the culprit, or the node that printed the most progress when
    # the culprit's rank printed none (the job's stages are the pack's)
    ref = culprit
    lengths = [len(node_iterations(job, r, cols)[0]) for r in range(job.n_nodes)] if cols else []
    if lengths and lengths[culprit] < 3 and max(lengths) >= 3:
        ref = int(np.argmax(lengths))
    timeline = {
        "clock": clock, "t0": _r(t0, 3), "span": _r(t1 - t0, 3), "bins": BINS,
        "skew_s": _r(skew, 2), "nodes": rows, "rest": rest,
        "job_stop": _r(t1 - t0, 3), "culprit_stop": _r(stops[culprit] - t0, 3),
        "n_nodes": job.n_nodes,
    }
    return {
        "timeline": timeline,
        "iterations": iteration_series(job, cols, culprit, iterations),
        "stages": _mark_culprit(
            stage_segments(job, ref, stage, lambda pos: times(ref, pos) - t0, cols),
            job.nodes[culprit]),
    }


def iteration_series(job: ParsedJob, cols: list[int], culprit: int,
                     iterations: list[tuple[int, float]]) -> dict | None:
    """Per-iteration durations: median over nodes and the culprit's own (seconds), or, for
    logs without clocks, the number of log records between counter lines."""
    if not cols:
        return None
    per_node: dict[int, dict[float, float]] = {}
    unit = "s"
    for r in range(job.n_nodes):
        p, n, t = node_iterations(job, r, cols)
        if len(n) < 2:
            continue
        val = np.diff(t)
        if np.isnan(val).all():
            val, unit = np.diff(p).astype(np.float64), "records"
        per_node[r] = {float(k): float(v) for k, v in zip(n[1:], val, strict=True)
                       if math.isfinite(k) and math.isfinite(v) and v >= 0}
    if not per_node:
        return None
    nums = sorted({k for d in per_node.values() for k in d})
    med = [float(np.median([d[k] for d in per_node.values() if k in d])) for k in nums]
    own = per_node.get(culprit, {})
    pts = [[k, m, own.get(k)] for k, m in zip(nums, med, strict=True)]
    if len(pts) > MAX_POINTS:  # keep each bucket's slowest point so spikes stay visible
        buckets = np.array_split(np.arange(len(pts)), MAX_POINTS)
        pts = [pts[int(b[np.argmax([max(pts[i][1], pts[i][2] or 0) for i in b])])]
               for b in buckets if len(b)]
    culprit_last = max(own) if own else None
    susp = [int(i) for i, _ in iterations[:5]]
    return {
        "unit": unit,
        "points": [[int(k), _r(m, 3), _r(c, 3) if c is not None else None] for k, m, c in pts],
        "suspicious": susp,
        "failure": susp[0] if susp else (int(culprit_last) if culprit_last else None),
        "culprit_last": int(culprit_last) if culprit_last is not None else None,
        "culprit": job.nodes[culprit],
        "healthy": None,
    }


def stage_segments(job: ParsedJob, r: int, final_stage: str, to_time,
                   counter: list[int] | None = None) -> dict:
    """The culprit's stages in order, by the framework profile's rules (start-up stages do not
    come back once training has begun; the iteration counter's own lines are training), and
    the stage the diagnosis says it stopped in."""
    profile = choose_profile(job.templates, job.framework)
    stage_of = [profile.stage_of(t) for t in job.templates]
    for c in counter or []:
        stage_of[c] = stage_of[c] or "training"
    names = sorted({s for s in stage_of if s})
    code = {s: i for i, s in enumerate(names)}
    table = np.array([code[s] if s else -1 for s in stage_of] + [-1], np.int64)
    seq = job.seqs[r]
    segs: list[list] = []
    if len(seq):
        st = table[np.minimum(seq.astype(np.int64), len(table) - 1)]
        idx = np.nonzero(st >= 0)[0]
        if len(idx):
            vals = st[idx]
            change = np.nonzero(np.append(True, vals[1:] != vals[:-1]))[0]
            trained = False
            for k in change.tolist():
                name = names[int(vals[k])]
                if name == "training":
                    trained = True
                if trained and name in EARLY:
                    continue
                if segs and segs[-1][0] == name:
                    continue
                if segs and segs[-1][0] == "finalization":
                    break
                segs.append([name, int(idx[k])])
    n_rec = max(len(seq) - 1, 0)
    out = []
    for i, (name, pos) in enumerate(segs):
        end = segs[i + 1][1] if i + 1 < len(segs) else n_rec
        a, b = to_time(np.array([pos, end]))
        out.append({"stage": name, "start": _r(a, 3), "end": _r(b, 3)})
    return {"node": job.nodes[r], "segments": out, "final": final_stage}


def _mark_culprit(stages: dict, culprit: str) -> dict:
    stages["culprit"] = stages.get("node") == culprit
    return stages


def healthy_durations(baselines: list[ParsedJob]) -> dict[str, list[float]]:
    """Per counter template of the healthy jobs: [10th, 50th, 90th percentile] of iteration
    durations (after the warm-up), so the iteration chart can draw the healthy range."""
    acc: dict[str, list[np.ndarray]] = {}
    for job in baselines:
        for r in range(job.n_nodes):
            for c in job.markers[r]:
                _, n, t = node_iterations(job, r, [c])
                d = np.diff(t)[5:]
                d = d[np.isfinite(d) & (d >= 0)]
                if len(d) >= 3:
                    acc.setdefault(job.templates[c], []).append(d)
    out = {}
    for tpl, parts in acc.items():
        d = np.concatenate(parts)
        out[tpl] = [round(float(x), 3) for x in np.percentile(d, [10, 50, 90])]
    return out


def attach_healthy_band(report: dict, healthy: dict[str, list[float]] | None) -> dict:
    """Put the healthy runs' iteration-duration range into ``charts.iterations`` (in place)."""
    its = (report.get("charts") or {}).get("iterations")
    band = (healthy or {}).get(report.get("iteration_marker") or "")
    if its and band and its.get("unit") == "s":
        its["healthy"] = band
    return report
