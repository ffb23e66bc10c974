"""Accuracy of l4 against the paper's baselines on simulated failed jobs with ground truth.

Usage::

    python benchmarks/accuracy.py [--jobs 40] [--seeds A..B] [--held-out] [--out DIR]
                                  [--json] [--verbose] [--baselines-only] [--workers N]
                                  [--oddities]
    python benchmarks/accuracy.py --cases DIR [--json] [--verbose]

``--cases DIR`` scores pre-generated cases instead of simulating them: every
``DIR/case-*/`` holding ``truth.json``, ``failed/`` and the baselines that ``truth.json``
names (the layout ``l4 simulate`` writes), e.g. the real torchrun runs of
``benchmarks/realruns/make_runs.py``.  Same scoring, same baselines, same table.

Each seed gives one case (:func:`l4.sim.simulate.simulate_case`): a failed job, successful
baseline jobs of the same configuration and ``truth.json``.  Framework, scale and fault
vary with the seed; consecutive seeds cover every fault kind.  ``--held-out`` uses seeds
9000.. that nobody tunes on.  l4 runs as ``l4.engine.diagnose(failed, baselines=[...])``;
the baselines are :mod:`l4.baselines`.

Scoring rules
-------------
* node top-k: a hit when any truth faulty node is among the first k entries of the
  ranking (``report["nodes"]`` for l4).  Error_time / Error_count rank nodes only.
* events (l4 and the error-level-lines baseline): a reported event *matches* a truth line
  when its template matches the line after masking with :func:`l4.mask.mask_line`
  (``<*>`` matches any run of characters; the whole masked line must match, or, for
  templates with at least 20 literal characters, a part of it).  Truth lines are the
  indicator lines (the fault's own output) and the symptom lines (propagated errors and
  launcher teardown) of ``truth.json``.

  - precision of a job = reported events matching an indicator or symptom line / reported
    events (a job where nothing is reported scores 0; jobs with neither indicators nor
    reports are left out);
  - recall of a job = distinct indicator kinds covered by some reported event / distinct
    indicator kinds.  Kinds ending in ``:context`` (traceback frames, boilerplate around
    the key line) count for precision but not for recall; jobs whose fault prints no
    indicator line at all (hang, slow node) are left out of recall;
  - P and R are averaged over jobs, F1 is computed from the two averages.
* stage: ``report["stage"] == truth["stage"]``.
* iteration top-k: the truth iteration is among the first k of ``report["iterations"]``;
  jobs whose truth iteration is null (faults outside the training loop) are left out.
* Baselines have no stage or iteration (printed as "-").
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from l4 import baselines as B  # noqa: E402
from l4.sim.simulate import simulate_suite  # noqa: E402
from l4.wrapped import unwrap_lines  # noqa: E402

NODE_K = (1, 3, 5, 8)
MAX_LINE = 4096  # l4.ingest.MAX_LINE, kept here so the baselines can run without l4
ITER_K = (1, 3)
ROWS = ("l4", "Error_time", "Error_count", "error-level-lines")


def _mask():
    try:
        from l4.mask import mask_line
    except ImportError:
        return B.fallback_mask
    return mask_line


_MASK = _mask()
_WS = re.compile(r"\s+")
_DIGITS = str.maketrans("123456789", "000000000")
_MASKED: dict[str, str] = {}


def mask_text(text: str) -> str:
    """l4's masking, cached by the digit-collapsed line (masking ignores which digit)."""
    key = text.translate(_DIGITS)
    hit = _MASKED.get(key)
    if hit is None:
        if len(_MASKED) > 100_000:
            _MASKED.clear()
        hit = _MASKED[key] = _MASK(text)
    return hit


# ---------------------------------------------------------------------------------------
# matching
# ---------------------------------------------------------------------------------------
_PARTS_CACHE: dict[str, tuple[tuple[str, ...] | None, int]] = {}


def template_parts(template: str) -> tuple[tuple[str, ...] | None, int]:
    """(literal pieces between a template's wildcards, number of literal characters); None
    for all-wildcard ones."""
    hit = _PARTS_CACHE.get(template)
    if hit is not None:
        return hit
    parts = tuple(_WS.sub(" ", template.strip()).split("<*>"))
    literal = sum(len(p.strip()) for p in parts)
    out = (None if literal < 3 else parts, literal)
    _PARTS_CACHE[template] = out
    return out


def _pieces_in_order(parts: tuple[str, ...], text: str, start: int, end: int) -> bool:
    """Whether every piece occurs in ``text[start:end]``, in order and without overlap.
    Taking each piece's leftmost occurrence is exact for wildcards that match anything,
    and linear: a backtracking regex of many ``.*?`` crawls on a long line."""
    pos = start
    for p in parts:
        if not p:
            continue
        i = text.find(p, pos, end)
        if i < 0:
            return False
        pos = i + len(p)
    return True


def template_matches(template: str, masked_line: str) -> bool:
    """Whether a reported template (``<*>`` = any text, whitespace-normalised like the
    line) is the whole masked truth line, or, for a long enough template, inside it."""
    parts, literal = template_parts(template)
    if parts is None:
        return False
    head, tail = parts[0], parts[-1]
    if len(parts) == 1:
        if masked_line == head:
            return True
    elif (masked_line.startswith(head) and masked_line.endswith(tail)
          and len(head) + len(tail) <= len(masked_line)
          and _pieces_in_order(parts[1:-1], masked_line, len(head), len(masked_line) - len(tail))):
        return True
    return literal >= 20 and _pieces_in_order(parts, masked_line, 0, len(masked_line))


def _read_lines(path: Path) -> list[str]:
    """Lines as l4 and the simulator count them: split at "\n" only (a progress bar's bare
    "\r" redraws stay on their line; Python's universal newlines would split them)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as fh:
        # a runtime's wrapper (l4.wrapped) is not part of what the program printed
        return unwrap_lines([line.removesuffix("\r") for line in fh.read().split("\n")])


def truth_lines(case: Path, truth: dict) -> list[tuple[str, str, str]]:
    """(role, kind, masked text) of every indicator and symptom line, deduplicated."""
    files: dict[str, list[str]] = {}
    seen = set()
    out = []
    for role in ("indicators", "symptoms"):
        for item in truth[role]:
            lines = files.get(item["file"])
            if lines is None:
                lines = files[item["file"]] = _read_lines(case / "failed" / item["file"])
            # l4 reads at most MAX_LINE bytes of a line, and a glued or megabyte-long truth
            # line would make the wildcard regexes below crawl
            text = lines[item["line"] - 1][:MAX_LINE]
            masked = _WS.sub(" ", mask_text(text)).strip()
            key = (role, item["kind"], masked)
            if key not in seen:
                seen.add(key)
                out.append(key)
    return out


def score_events(templates: list[str], tlines: list[tuple[str, str, str]]) -> tuple[float | None, float | None]:
    """(precision, recall) of one job's reported templates (None = not applicable)."""
    key_kinds = {k for role, k, _ in tlines if role == "indicators" and not k.endswith(":context")}
    covered: set[str] = set()
    matched = 0
    for tmpl in templates:
        hit = False
        for role, kind, masked in tlines:
            if template_matches(tmpl, masked):
                hit = True
                if role == "indicators" and kind in key_kinds:
                    covered.add(kind)
        matched += hit
    if templates:
        precision: float | None = matched / len(templates)
    else:
        precision = 0.0 if key_kinds else None
    recall = len(covered) / len(key_kinds) if key_kinds else None
    return precision, recall


# ---------------------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------------------


def _load_engine():
    try:
        from l4.engine import diagnose
    except ImportError as exc:
        return None, exc
    return diagnose, None


def evaluate_case(case: Path, truth: dict, diagnose, kb: Path | None = None) -> dict:
    """Score l4 and the baselines on one case; with ``kb`` also the category that the
    knowledge base gives the diagnosis (``l4.pipeline.attach_root_causes``)."""
    failed = case / "failed"
    bdirs = [case / b for b in truth.get("baselines", [])]
    res: dict = {"case": case.name, "fault": truth["fault"]["id"], "category": truth["fault"]["category"],
                 "framework": truth["framework"], "truth_nodes": truth["faulty_nodes"],
                 "truth_stage": truth["stage"], "truth_iteration": truth["iteration"]}
    tl = truth_lines(case, truth)
    t0 = time.perf_counter()
    rank_time = B.error_time_ranking(failed)
    rank_count = B.error_count_ranking(failed)
    ev = B.error_level_events(failed)
    res["baseline_seconds"] = time.perf_counter() - t0
    res["Error_time"] = {"nodes": rank_time}
    res["Error_count"] = {"nodes": rank_count}
    p, r = score_events([e["template"] for e in ev], tl)
    res["error-level-lines"] = {"events_p": p, "events_r": r, "n_events": len(ev)}
    if diagnose is not None:
        t0 = time.perf_counter()
        try:
            report = diagnose(failed, baselines=bdirs)
            err = None
        except Exception as exc:  # a crash is a miss, reported, not a benchmark abort
            report, err = None, f"{type(exc).__name__}: {exc}"
        res["l4_seconds"] = time.perf_counter() - t0
        if report is None:
            res["l4"] = {"error": err, "nodes": [], "stage": None, "iterations": [], "events_p": 0.0,
                         "events_r": 0.0 if any(k for ro, k, _ in tl if ro == "indicators") else None}
        else:
            if kb is not None:
                from l4.pipeline import attach_root_causes

                attach_root_causes(report, kb=kb)
            templates = [e["template"] for e in report.get("events", [])]
            p, r = score_events(templates, tl)
            res["l4"] = {"nodes": [n["node"] for n in report.get("nodes", [])],
                         "stage": report.get("stage"),
                         "iterations": [i["iteration"] for i in report.get("iterations", [])],
                         "events_p": p, "events_r": r, "n_events": len(templates),
                         "root_cause": (report.get("root_causes") or [{}])[0].get("pattern_id"),
                         "categories": [c["category"] for c in report.get("categories") or []]}
    return res


def _hit(ranking: list, truth: list, k: int) -> bool:
    return any(x in truth for x in ranking[:k])


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def aggregate(results: list[dict]) -> dict[str, dict]:
    """Metrics per row (l4 and the baselines) over ``results``."""
    table: dict[str, dict] = {}
    for row in ROWS:
        rows = [r for r in results if row in r]
        if not rows:
            continue
        m: dict = {"n": len(rows)}
        if row != "error-level-lines":
            for k in NODE_K:
                m[f"node@{k}"] = _mean([float(_hit(r[row]["nodes"], r["truth_nodes"], k)) for r in rows])
        if row in ("l4", "error-level-lines"):
            ps = [r[row]["events_p"] for r in rows if r[row].get("events_p") is not None]
            rs = [r[row]["events_r"] for r in rows if r[row].get("events_r") is not None]
            p, rr = _mean(ps), _mean(rs)
            m["events_P"], m["events_R"] = p, rr
            m["events_F1"] = (2 * p * rr / (p + rr)) if p and rr else (0.0 if p is not None and rr is not None else None)
        if row == "l4":
            m["stage"] = _mean([float(r["l4"]["stage"] == r["truth_stage"]) for r in rows])
            it_rows = [r for r in rows if r["truth_iteration"] is not None]
            for k in ITER_K:
                m[f"iter@{k}"] = _mean([float(r["truth_iteration"] in r["l4"]["iterations"][:k]) for r in it_rows])
            for k in ITER_K:  # the independent benchmark's measure: within one iteration
                m[f"iter@{k}±1"] = _mean([float(any(abs(it - r["truth_iteration"]) <= 1
                                                    for it in r["l4"]["iterations"][:k])) for r in it_rows])
            m["n_iter_jobs"] = len(it_rows)
            cat_rows = [r for r in rows if r["l4"].get("categories")]
            for k in (1, 3):
                m[f"cat@{k}"] = _mean([float(r["category"] in r["l4"]["categories"][:k]) for r in cat_rows])
        table[row] = m
    return table


COLS = ("events_P", "events_R", "events_F1", "node@1", "node@3", "node@5", "node@8", "stage", "iter@1", "iter@3",
        "iter@3±1", "cat@1", "cat@3")


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def render_table(table: dict[str, dict], n_jobs: int, what: str = "simulated") -> str:
    head = f"{'method':<18}" + "".join(f"{c:>10}" for c in COLS)
    lines = [f"accuracy over {n_jobs} {what} failed jobs", head, "-" * len(head)]
    for row in ROWS:
        if row not in table:
            continue
        m = table[row]
        lines.append(f"{row:<18}" + "".join(f"{_fmt(m.get(c)):>10}" for c in COLS))
    return "\n".join(lines)


def breakdown(results: list[dict], key: str) -> list[str]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        groups[r[key]].append(r)
    out = []
    for name in sorted(groups):
        t = aggregate(groups[name])
        parts = [f"{key}={name} (n={len(groups[name])}):"]
        if "l4" in t:
            m = t["l4"]
            parts.append(f"l4 node@1={_fmt(m['node@1'])} F1={_fmt(m['events_F1'])} stage={_fmt(m['stage'])} "
                         f"iter@1={_fmt(m['iter@1'])}")
        parts.append(f"| Error_time node@1={_fmt(t['Error_time']['node@1'])}")
        parts.append(f"| Error_count node@1={_fmt(t['Error_count']['node@1'])}")
        parts.append(f"| error-level F1={_fmt(t['error-level-lines']['events_F1'])}")
        out.append(" ".join(parts))
    return out


def misses(results: list[dict]) -> list[str]:
    out = []
    for r in results:
        if "l4" not in r:
            continue
        m = r["l4"]
        got_node = m["nodes"][0] if m["nodes"] else None
        got_it = m["iterations"][0] if m["iterations"] else None
        bad = []
        if got_node not in r["truth_nodes"]:
            bad.append("node")
        if m["stage"] != r["truth_stage"]:
            bad.append("stage")
        if r["truth_iteration"] is not None and got_it != r["truth_iteration"]:
            bad.append("iteration")
        if m.get("error"):
            bad.append("crash")
        if bad:
            tn = r["truth_nodes"] if len(r["truth_nodes"]) <= 3 else r["truth_nodes"][:3] + ["..."]
            out.append(f"{r['case']} [{','.join(bad)}] fault={r['fault']} fw={r['framework']} | truth "
                       f"nodes={tn} stage={r['truth_stage']} it={r['truth_iteration']} | got node={got_node} "
                       f"stage={m['stage']} it={got_it}" + (f" | {m['error']}" if m.get("error") else ""))
    return out


def per_case(results: list[dict]) -> list[str]:
    """One line per case: truth against l4's answer (node top-1, stage, first iterations)."""
    out = []
    for r in results:
        m = r.get("l4")
        if m is None:
            continue
        node = m["nodes"][0] if m["nodes"] else None
        its = m["iterations"][:3]
        marks = ["node" if node in r["truth_nodes"] else "NODE",
                 "stage" if m["stage"] == r["truth_stage"] else "STAGE"]
        if r["truth_iteration"] is not None:
            marks.append("iter" if r["truth_iteration"] in its else "ITER")
        if m.get("categories"):
            marks.append("cat" if m["categories"][0] == r["category"] else "CAT:" + m["categories"][0])
        out.append(f"{r['case']:<11} {r['fault']:<18} truth {','.join(r['truth_nodes']):<14} "
                   f"{r['truth_stage']:<14} it={r['truth_iteration']!s:<5}| l4 {node!s:<14} {m['stage']!s:<14} "
                   f"it={its} [{' '.join(marks)}]" + (f" {m['error']}" if m.get("error") else ""))
    return out


def parse_seeds(text: str) -> list[int]:
    """``"A..B"`` (inclusive) or ``"1,5,9"``."""
    if ".." in text:
        a, b = text.split("..", 1)
        return list(range(int(a), int(b) + 1))
    return [int(x) for x in text.split(",") if x.strip()]


def load_cases(root: Path) -> list[tuple[Path, dict]]:
    """(case dir, truth) of every pre-generated case under ``root``, in seed order.

    Raises :class:`ValueError` with a one-line reason when there is nothing to score or a
    case is incomplete, so a half-copied benchmark is never scored silently."""
    if not root.is_dir():
        raise ValueError(f"{root} is not a directory")
    found = []
    for case in root.iterdir():
        tp = case / "truth.json"
        if not case.is_dir() or not tp.is_file():
            continue
        try:
            truth = json.loads(tp.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{tp}: unreadable truth ({exc})") from exc
        missing = [d for d in ["failed", *truth.get("baselines", [])] if not (case / d).is_dir()]
        if missing:
            raise ValueError(f"{case}: missing {', '.join(missing)}")
        found.append((case, truth))
    if not found:
        raise ValueError(f"no case directories with a truth.json under {root}")

    def order(item: tuple[Path, dict]) -> tuple[int, str]:
        tail = item[0].name.rsplit("-", 1)[-1]
        return (int(tail), "") if tail.isdigit() else (1 << 62, item[0].name)

    return sorted(found, key=order)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=40, help="number of cases (default 40)")
    ap.add_argument("--seeds", help="seed range A..B (inclusive) or a comma list; overrides --jobs")
    ap.add_argument("--held-out", action="store_true", help="use the held-out seeds 9000..")
    ap.add_argument("--out", type=Path, help="keep the generated cases here (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print the metrics as JSON instead of a table")
    ap.add_argument("--verbose", action="store_true", help="also list l4's misses")
    ap.add_argument("--per-case", action="store_true", help="also print truth against l4's answer per case")
    ap.add_argument("--baselines-only", action="store_true", help="score only the baselines")
    ap.add_argument("--workers", type=int, default=None, help="processes for case generation")
    ap.add_argument("--oddities", action="store_true",
                    help="add collector oddities (CRLF, bad UTF-8, huge lines...) to the failed jobs")
    ap.add_argument("--cases", type=Path, metavar="DIR",
                    help="score the pre-generated cases DIR/case-*/ (e.g. real torchrun runs) instead of simulating")
    ap.add_argument("--categories", type=Path, metavar="KB", nargs="?", const=Path("-"),
                    help="also match each diagnosis against the knowledge base KB (a DuckDB file, created "
                         "with the shipped library when missing; default: a temporary one) and score the "
                         "category it reports (cat@1, cat@3)")
    args = ap.parse_args(argv)
    if args.cases is not None and (args.seeds or args.held_out or args.out or args.oddities):
        ap.error("--cases scores existing cases: it takes no --seeds, --held-out, --out or --oddities")
    # one fresh template store for the whole run: what a new installation would see, and
    # never the user's own store
    os.environ.setdefault(
        "L4_TEMPLATES", os.path.join(tempfile.mkdtemp(prefix="l4-accuracy-templates-"), "t.store")
    )

    cases = None
    if args.cases is not None:
        try:
            cases = load_cases(args.cases)
        except ValueError as exc:
            print(f"error: --cases: {exc}", file=sys.stderr)
            return 2
        seeds = [t.get("seed", i) for i, (_, t) in enumerate(cases)]
    elif args.seeds:
        try:
            seeds = parse_seeds(args.seeds)
        except ValueError:
            ap.error(f"--seeds: expected A..B or a comma list of integers, got {args.seeds!r}")
    else:
        start = 9000 if args.held_out else 0
        seeds = list(range(start, start + args.jobs))
    if not seeds:
        ap.error("no seeds to run")

    diagnose = None
    if not args.baselines_only:
        diagnose, exc = _load_engine()
        if diagnose is None:
            print(f"error: l4.engine.diagnose is not available ({exc}); "
                  "run with --baselines-only to score the baselines alone", file=sys.stderr)
            return 2

    tmp = None
    out = args.out
    if out is None and cases is None:
        tmp = tempfile.mkdtemp(prefix="l4-accuracy-")
        out = Path(tmp)
    try:
        t0 = time.perf_counter()
        if cases is None:
            truths = simulate_suite(out, seeds, workers=args.workers, oddities=args.oddities)
            cases = [(out / f"case-{seed}", truth) for seed, truth in zip(seeds, truths, strict=True)]
        t_gen = time.perf_counter() - t0
        results = []
        t0 = time.perf_counter()
        kb = args.categories
        if kb is not None and str(kb) == "-":
            kb = Path(tempfile.mkdtemp(prefix="l4-accuracy-kb-")) / "kb.duckdb"
        for case, truth in cases:
            results.append(evaluate_case(case, truth, diagnose, kb))
        t_eval = time.perf_counter() - t0
        table = aggregate(results)
        if args.json:
            print(json.dumps({"seeds": [seeds[0], seeds[-1]], "n_jobs": len(results), "metrics": table,
                              "by_framework": {k: aggregate([r for r in results if r["framework"] == k])
                                               for k in sorted({r["framework"] for r in results})},
                              "by_category": {k: aggregate([r for r in results if r["category"] == k])
                                              for k in sorted({r["category"] for r in results})},
                              "misses": misses(results) if args.verbose else None,
                              "per_case": results if args.per_case else None,
                              "seconds": {"generate": t_gen, "evaluate": t_eval}}, indent=1))
        else:
            print(render_table(table, len(results), "simulated" if args.cases is None else "pre-generated"))
            print()
            keys = ("framework", "category") if args.cases is None else ("fault", "category")
            for line in [ln for k in keys for ln in breakdown(results, k)]:
                print(line)
            if args.per_case:
                print("\nper case (capitals = l4 wrong):")
                for line in per_case(results):
                    print("  " + line)
            if args.verbose:
                print("\nmisses (l4):")
                for line in misses(results):
                    print("  " + line)
            where = f"cases in {args.cases}" if args.cases is not None else f"seeds {seeds[0]}..{seeds[-1]}"
            print(f"\n({where}; generated in {t_gen:.1f}s, evaluated in {t_eval:.1f}s"
                  + (f"; cases kept in {out}" if args.out else "") + ")")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
