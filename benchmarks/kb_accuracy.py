"""Accuracy and speed of the fault knowledge base: categories, patterns, silence, cost.

    .venv/bin/python benchmarks/kb_accuracy.py [--data PATH] [--json] [--calibrate]
                                               [--no-loso] [--timing] [--sweep]

Four evaluations, each next to a keyword baseline (pattern keywords = words of title,
indicators, codes; score = distinct keywords present / sqrt(#keywords); it always
guesses, so it is never silent):

1. Leave-one-source-out over the library (``--no-loso`` skips it; runs on whatever
   kb/seed_patterns.yaml holds).  For every pattern P, P and every pattern citing one of
   P's sources are removed from the matcher (``exclude``) AND from the category
   classifier's training data (a fold model is fitted without them); P's indicator lines
   are then matched as a log excerpt.  Reported: category top-1 / top-3 (the report's
   ``categories`` field), and pattern top-1 where the pattern exists: P counts only when
   another pattern of the same fault survives the exclusion; the same fault means the
   same group in benchmarks/kb_same_fault.yaml (reviewed), or the same category and an
   indicator line of one matching the other literally as a wildcard template.  Which
   pattern ranks first and whether it is shown are separate questions, so the ranking of
   all patterns (no threshold: ``pattern_top1_ranked`` / ``pattern_top3_ranked``) is
   reported too; ``--misses`` prints each miss with the first ranked pattern, the
   same-fault pattern's rank and both scores.
2. Held-out real excerpts: a failure excerpt of real-failures.jsonl is held out when
   ``int(sha256(SALT + id), 16) % 10 < 3`` (28 of 91); the seed library was written
   from the others; labels in benchmarks/kb_heldout_labels.yaml.  Category top-1/top-3
   from ``categories``; pattern top-1/top-3 over the excerpts with a labelled pattern
   (no suggestion above the threshold counts as a miss).
3. Silence on normal excerpts (kind: normal): the share with no suggestion at all.
4. ``--timing``: ``l4 kb match`` on a 50-line excerpt as a user runs it (a new process
   each time, ``python -m l4.cli``): median of 5 runs when every line is already in the
   knowledge base's embedding cache, and when every line is new (a fresh token per run).

``--public-lines`` adds the category of the 170 labelled public failure lines of
benchmarks/kb_public_lines.yaml, which no pattern or exemplar was written from (the
closest measure here of failure text nobody has shown the knowledge base), next to the
keyword baseline; it needs no ../shared data.

``--excerpts-loso`` adds the category of the NON-held-out real failure excerpts with a
category, each with every pattern citing its source left out of the matcher and of the
classifier (development data closest to a new user's text).

``--patterns-only`` runs the leave-one-source-out for pattern top-1 alone (the folds'
classifiers are not fitted, so no category figures): how l4.rootcause's RARE_* constants
of the hybrid pattern score were chosen, together with the silence on normal excerpts.

``--calibrate`` prints the threshold sweep on the NON-held-out failure excerpts vs the
normal excerpts (how THRESHOLD was chosen); ``--sweep`` the classifier settings under
leave-one-source-out (how l4.category's constants were chosen; never on held-out data).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from l4 import category, kbstore, rootcause  # noqa: E402

SALT = "l4-kb-heldout-v1"
LABELS = ROOT / "benchmarks" / "kb_heldout_labels.yaml"
SAME_FAULT = ROOT / "benchmarks" / "kb_same_fault.yaml"
PUBLIC_LINES = ROOT / "benchmarks" / "kb_public_lines.yaml"
_STOP = set(
    "the and for with from this that was are not has have had been into than then when while "
    "error errors failed failure warn info rank process call line file".split()
)


def held_out(excerpt_id: str) -> bool:
    return int(hashlib.sha256((SALT + excerpt_id).encode()).hexdigest(), 16) % 10 < 3


def load_excerpts(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z][a-z0-9_]{2,}", text.lower()) if w not in _STOP}


class KeywordBaseline:
    """Bag-of-keywords matcher: the obvious thing an SRE would script with grep."""

    def __init__(self, patterns: list[dict]):
        self.patterns = [
            (p, _words(" ".join([p["title"], *p["indicators"], *p["codes"]]))) for p in patterns
        ]

    def rank(self, lines: list[str]) -> list[dict]:
        words = _words("\n".join(lines))
        scored = [
            (len(words & kw) / math.sqrt(len(kw) or 1), p) for p, kw in self.patterns
        ]
        scored.sort(key=lambda s: (-s[0], s[1]["id"]))
        return [{"pattern_id": p["id"], "category": p["category"], "similarity": s}
                for s, p in scored[:3] if s > 0]


def _cats_of(ranked: list[dict]) -> list[str]:
    """Distinct categories of ranked suggestions, best first (how a matcher names one)."""
    return list(dict.fromkeys(r["category"] for r in ranked))


def _metrics(results: list[tuple[dict, list[dict], list[str]]]) -> dict:
    """results: (label, ranked patterns, ranked categories) per excerpt."""
    cat1 = cat3 = pat1 = pat3 = n_pat = 0
    for label, ranked, cats in results:
        pids = [r["pattern_id"] for r in ranked]
        cat1 += bool(cats) and cats[0] == label["category"]
        cat3 += label["category"] in cats[:3]
        if label["patterns"]:
            n_pat += 1
            pat1 += bool(pids) and pids[0] in label["patterns"]
            pat3 += any(p in label["patterns"] for p in pids[:3])
    n = max(len(results), 1)
    return {
        "n": n, "n_with_pattern": n_pat,
        "category_top1": cat1 / n, "category_top3": cat3 / n,
        "pattern_top1": pat1 / max(n_pat, 1), "pattern_top3": pat3 / max(n_pat, 1),
    }


# --- leave-one-source-out over the library ---------------------------------------------------


def same_fault_groups(patterns: list[dict]) -> dict[str, set[str]]:
    """pattern id -> ids of other patterns that describe the same fault (see module doc)."""
    ids = {p["id"] for p in patterns}
    out: dict[str, set[str]] = {pid: set() for pid in ids}
    doc = yaml.safe_load(SAME_FAULT.read_text()) if SAME_FAULT.is_file() else {}
    parent = {pid: pid for pid in ids}  # groups sharing a member are one fault (closure)

    def root(a: str) -> str:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for group in (doc or {}).get("groups") or []:
        members = [g for g in group if g in ids]
        for b in members[1:]:
            parent[root(b)] = root(members[0])
    by_root: dict[str, set[str]] = {}
    for pid in ids:
        by_root.setdefault(root(pid), set()).add(pid)
    for members in by_root.values():
        for a in members:
            out[a] |= members - {a}
    norm = {p["id"]: [rootcause._norm_for_template(i) for i in p["indicators"]] for p in patterns}
    for p in patterns:
        rxs = [rx for rx in (rootcause.template_regex(i) for i in p["indicators"]) if rx is not None]
        for q in patterns:
            if q["id"] == p["id"] or q["category"] != p["category"]:
                continue
            if any(rx.search(t) for rx in rxs for t in norm[q["id"]]):
                out[p["id"]].add(q["id"])
                out[q["id"]].add(p["id"])
    return out


def _without(samples: list, excl: frozenset, sources: set) -> list:
    """Training samples without the excluded patterns' texts and without the real lines
    (kb/category_exemplars.yaml) taken from one of ``sources``: a report never teaches
    the classifier the answer to itself."""
    return [s for s in samples if s.pattern_id not in excl
            and not (s.pattern_id.startswith("exemplar:") and set(s.sources) & sources)]


def loso(kb: Path, patterns: list[dict], samples: list, *, verbose: bool = False,
         settings: dict | None = None, every: int = 1, patterns_only: bool = False) -> dict:
    """Leave-one-source-out: matcher, classifier and keyword baseline without P's sources.

    ``patterns_only`` skips the folds' classifier fits (the full model ranks the
    categories, so the category figures are then NOT leave-one-source-out and are
    dropped): pattern top-1 does not depend on the classifier, and this is ~10x faster."""
    saved = {k: getattr(category, k) for k in (settings or {})}
    for k, v in (settings or {}).items():
        setattr(category, k, v)
    try:
        return _loso(kb, patterns, samples, verbose, every, patterns_only)
    finally:
        for k, v in saved.items():
            setattr(category, k, v)


def _loso(kb: Path, patterns: list[dict], samples: list, verbose: bool, every: int = 1,
          patterns_only: bool = False) -> dict:
    sources = {p["id"]: set(p["sources"]) for p in patterns}
    same = same_fault_groups(patterns)
    models: dict[tuple[frozenset, frozenset], category.CategoryModel] = {}
    full = category.train(samples)  # only a starting point for the folds' solver
    ours, base = [], []
    n_exists = pat1_ours = pat1_base = pat1_ranked = pat3_ranked = 0
    misses: list[dict] = []
    per_cat: dict[str, list[int]] = {}
    calib: list[tuple[dict[str, float], str]] = []
    for p in patterns[::max(every, 1)]:  # the queries; the library is always all of it
        if not p["indicators"]:
            continue
        excl = frozenset(q["id"] for q in patterns
                         if q["id"] == p["id"] or sources[q["id"]] & sources[p["id"]])
        key = (excl, frozenset(sources[p["id"]]))
        if patterns_only:
            models[key] = full
        elif key not in models:
            models[key] = category.train(_without(samples, excl, sources[p["id"]]), init=full)
        # every pattern ranked (no threshold): which one is first and whether it is shown
        # are separate questions; the categories do not depend on the caller's threshold
        m = rootcause.match_lines_full(p["indicators"], kb=kb, top_k=len(patterns), exclude=excl,
                                       model=models[key], threshold=0.0)
        ranked_all = m.root_causes
        m.root_causes = [r for r in ranked_all if r["similarity"] >= rootcause.THRESHOLD][:3]
        cats = [c["category"] for c in m.categories]
        kw = KeywordBaseline([q for q in patterns if q["id"] not in excl]).rank(p["indicators"])
        label = {"category": p["category"], "patterns": []}
        ours.append((label, m.root_causes, cats))
        base.append((label, kw, _cats_of(kw)))
        per_cat.setdefault(p["category"], []).append(int(cats[0] == p["category"]))
        conf = {c["category"]: float(c["confidence"]) for c in m.categories}
        calib.append((conf, p["category"]))
        exists = same[p["id"]] - excl
        if exists:
            n_exists += 1
            pat1_ours += bool(m.root_causes) and m.root_causes[0]["pattern_id"] in exists
            pat1_base += bool(kw) and kw[0]["pattern_id"] in exists
            ids = [r["pattern_id"] for r in ranked_all]
            rank = min((ids.index(e) for e in exists if e in ids), default=len(ids))
            pat1_ranked += rank == 0
            pat3_ranked += rank < 3
            if not (m.root_causes and m.root_causes[0]["pattern_id"] in exists):
                misses.append({
                    "pattern": p["id"], "category": p["category"], "same_fault": sorted(exists),
                    "first": ids[0] if ids else None,
                    "first_score": ranked_all[0]["similarity"] if ranked_all else 0.0,
                    "same_fault_rank": rank + 1,
                    "same_fault_score": ranked_all[rank]["similarity"] if rank < len(ids) else 0.0,
                    "shown": bool(m.root_causes)})
        if verbose:
            ok = "ok " if cats[0] == p["category"] else "-- "
            print(f"{ok}{p['id']} [{p['category']}] got {m.categories[0]} "
                  f"top={[r['pattern_id'] for r in m.root_causes]} exists={sorted(exists)}",
                  file=sys.stderr)
    mo, mb = _metrics(ours), _metrics(base)
    ranked = {"pattern_top1_ranked": pat1_ranked / max(n_exists, 1),
              "pattern_top3_ranked": pat3_ranked / max(n_exists, 1)}
    if patterns_only:
        return {"n": mo["n"], "n_pattern_exists": n_exists, "patterns_only": True,
                "ours": {"pattern_top1_where_exists": pat1_ours / max(n_exists, 1), **ranked},
                "keyword_baseline": {"pattern_top1_where_exists": pat1_base / max(n_exists, 1)},
                "pattern_misses": misses}
    return {
        "n": mo["n"], "n_pattern_exists": n_exists, "pattern_misses": misses,
        "ours": {"category_top1": mo["category_top1"], "category_top3": mo["category_top3"],
                 "pattern_top1_where_exists": pat1_ours / max(n_exists, 1), **ranked,
                 "category_top1_by_category": {k: sum(v) / len(v) for k, v in sorted(per_cat.items())},
                 "calibration": calibration(calib)},
        "keyword_baseline": {"category_top1": mb["category_top1"], "category_top3": mb["category_top3"],
                             "pattern_top1_where_exists": pat1_base / max(n_exists, 1)},
    }


def excerpts_loso(kb: Path, patterns: list[dict], samples: list, excerpts: list[dict], *,
                  verbose: bool = False) -> dict:
    """Leave-source-out on real excerpts: every NON-held-out failure excerpt with a known
    category, matched with every pattern citing the excerpt's source left out of the
    matcher and of the classifier's training data.  Closer to a new user's text than the
    library's own indicator lines (tracebacks, launcher noise, several faults' echoes);
    development data (the held-out excerpts are never used here)."""
    full = category.train(samples)
    rows = []
    for e in excerpts:
        if e.get("category") not in category.CATEGORIES or held_out(e["id"]):
            continue
        excl = frozenset(p["id"] for p in patterns if e.get("source") in p["sources"])
        gone = _without(samples, excl, {e.get("source")})
        model = category.train(gone, init=full) if len(gone) < len(samples) else full
        m = rootcause.match_lines_full(e["lines"], kb=kb, top_k=3, exclude=excl, model=model)
        cats = [c["category"] for c in m.categories]
        kw = KeywordBaseline([q for q in patterns if q["id"] not in excl]).rank(e["lines"])
        rows.append((e["category"], cats, _cats_of(kw)))
        if verbose:
            print(f"{'ok ' if cats[0] == e['category'] else '-- '}{e['id']} [{e['category']}] "
                  f"got {m.categories[0]} top={[r['pattern_id'] for r in m.root_causes]}", file=sys.stderr)
    return _category_figures(rows)


def public_lines(kb: Path, patterns: list[dict], path: Path = PUBLIC_LINES, *,
                 verbose: bool = False) -> dict:
    """Category of ``kb match`` on labelled public failure lines the library was not
    written from (each report's lines matched as one excerpt), next to the keyword
    baseline: how the four-way answer holds on a new user's text."""
    items = yaml.safe_load(path.read_text(encoding="utf-8"))["lines"]
    kw = KeywordBaseline(patterns)
    rows = []
    for it in items:
        lines = [str(x) for x in it["lines"]]
        m = rootcause.match_lines_full(lines, kb=kb, top_k=3)
        cats = [c["category"] for c in m.categories]
        rows.append((it["category"], cats, _cats_of(kw.rank(lines))))
        if verbose:
            print(f"{'ok ' if cats[:1] == [it['category']] else '-- '}[{it['category']}] "
                  f"got {m.categories[0]} {lines[0][:90]}", file=sys.stderr)
    return _category_figures(rows)


def _category_figures(rows: list[tuple[str, list[str], list[str]]]) -> dict:
    """Category top-1 / top-3, top-1 by category and the keyword baseline's top-1 and
    top-3, from (wanted, l4's categories, the baseline's categories) per item."""
    n = max(len(rows), 1)
    by: dict[str, list[int]] = {}
    for want, cats, _ in rows:
        by.setdefault(want, []).append(int(cats[:1] == [want]))
    return {"n": len(rows),
            "category_top1": sum(c[:1] == [w] for w, c, _ in rows) / n,
            "category_top3": sum(w in c[:3] for w, c, _ in rows) / n,
            "category_top1_by_category": {k: sum(v) / len(v) for k, v in sorted(by.items())},
            "keyword_baseline_top1": sum(b[:1] == [w] for w, _, b in rows) / n,
            "keyword_baseline_top3": sum(w in b[:3] for w, _, b in rows) / n}


def calibration(rows: list[tuple[dict[str, float], str]], bins: int = 10) -> dict:
    """Does "category: user (0.81)" mean right 81 % of the time?  Expected calibration
    error of the top confidence (equal-width bins), the mean top confidence of right and
    of wrong answers, and the mean negative log-likelihood of the true category."""
    if not rows:
        return {}
    tops = [(max(c.values()), max(c, key=lambda k: c[k]) == want) for c, want in rows]
    ece = 0.0
    for b in range(bins):
        inside = [(q, ok) for q, ok in tops if b / bins < q <= (b + 1) / bins or (b == 0 and q == 0)]
        if inside:
            ece += len(inside) / len(tops) * abs(sum(ok for _, ok in inside) / len(inside)
                                                 - sum(q for q, _ in inside) / len(inside))
    right = [q for q, ok in tops if ok]
    wrong = [q for q, ok in tops if not ok]
    return {"ece": round(ece, 4),
            "mean_confidence_right": round(sum(right) / max(len(right), 1), 4),
            "mean_confidence_wrong": round(sum(wrong) / max(len(wrong), 1), 4),
            "nll": round(sum(-math.log(max(c.get(want, 0.0), 1e-6)) for c, want in rows) / len(rows), 4)}


# --- categories of diagnosed (simulated) jobs ---------------------------------------------------


def diagnosed_jobs(kb: Path, seeds: list[int]) -> dict:
    """``l4 diagnose`` (engine + knowledge base) on simulated failed jobs with a known
    category: the report's ``categories`` vs the category of the first root cause."""
    from l4.engine import diagnose
    from l4.pipeline import attach_root_causes
    from l4.sim.simulate import simulate_suite

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        truths = simulate_suite(Path(tmp), seeds, workers=1)
        for seed, truth in zip(seeds, truths, strict=True):
            case = Path(tmp) / f"case-{seed}"
            report = diagnose(case / "failed", [case / b for b in truth.get("baselines", [])])
            attach_root_causes(report, kb=kb)
            cats = [c["category"] for c in report.get("categories") or []]
            first = (report.get("root_causes") or [{}])[0].get("category")
            rows.append({"seed": seed, "truth": truth["fault"]["category"], "categories": cats[:3],
                         "first_root_cause": first})
    n = max(len(rows), 1)
    return {
        "seeds": [seeds[0], seeds[-1]], "n": len(rows),
        "category_top1": sum(bool(r["categories"]) and r["categories"][0] == r["truth"] for r in rows) / n,
        "category_top3": sum(r["truth"] in r["categories"][:3] for r in rows) / n,
        "first_root_cause_category": sum(r["first_root_cause"] == r["truth"] for r in rows) / n,
        "misses": [r for r in rows if not r["categories"] or r["categories"][0] != r["truth"]],
    }


def diagnosed_realruns(kb: Path, root: Path) -> dict:
    """The same on real torchrun runs (benchmarks/realruns): every ``case-*`` under
    ``root`` with a category in its truth.json.  Only development runs: the held-out
    directory is never passed here while developing."""
    from l4.engine import diagnose
    from l4.pipeline import attach_root_causes

    rows = []
    for case in sorted(p for p in root.glob("case-*") if (p / "truth.json").is_file()):
        truth = json.loads((case / "truth.json").read_text())
        want = (truth.get("fault") or {}).get("category")
        if not want:
            continue
        report = diagnose(case / "failed", [case / b for b in truth.get("baselines", [])])
        attach_root_causes(report, kb=kb)
        cats = [c["category"] for c in report.get("categories") or []]
        first = (report.get("root_causes") or [{}])[0].get("category")
        rows.append({"case": case.name, "fault": truth["fault"].get("id"), "truth": want,
                     "categories": cats[:3], "first_root_cause": first})
    n = max(len(rows), 1)
    return {
        "root": str(root), "n": len(rows),
        "category_top1": sum(bool(r["categories"]) and r["categories"][0] == r["truth"] for r in rows) / n,
        "category_top3": sum(r["truth"] in r["categories"][:3] for r in rows) / n,
        "first_root_cause_category": sum(r["first_root_cause"] == r["truth"] for r in rows) / n,
        "misses": [r for r in rows if not r["categories"] or r["categories"][0] != r["truth"]],
    }


# --- speed of `l4 kb match` as a user runs it ------------------------------------------------


_CPU: list[float] = []


def _cli_seconds(file: Path, kb: Path) -> float:
    """Wall time of one `l4 kb match` process; its CPU time is appended to _CPU (on a busy
    shared machine the wall time is mostly waiting for a core)."""
    import resource

    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "l4.cli", "kb", "match", str(file), "--kb", str(kb),
                        "--format", "json"], capture_output=True, text=True, env=env, check=False)
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    _CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if r.returncode != 0:
        raise RuntimeError(f"l4 kb match failed: {r.stderr.strip()[:300]}")
    return dt


def timing(kb: Path, failures: list[dict], runs: int = 5) -> dict:
    """Median wall time of `l4 kb match` on a 50-line excerpt, known vs new text."""
    lines: list[str] = []
    for e in failures:
        lines += e["lines"]
        if len(lines) >= 50:
            break
    lines = lines[:50]
    with tempfile.TemporaryDirectory() as tmp:
        known = Path(tmp) / "known.log"
        known.write_text("\n".join(lines) + "\n")
        _cli_seconds(known, kb)  # first sight: embeds and caches the lines
        del _CPU[:]
        t_known = [_cli_seconds(known, kb) for _ in range(runs)]
        cpu_known = list(_CPU)
        del _CPU[:]
        t_new = []
        for _ in range(runs):
            fresh = Path(tmp) / "new.log"
            # letters only: a token with a digit is masked away and the line would be known
            tag = "".join(chr(ord("a") + int(c, 16) % 26) for c in uuid.uuid4().hex[:10])
            fresh.write_text("\n".join(f"{ln} [job {tag}x]" for ln in lines) + "\n")
            t_new.append(_cli_seconds(fresh, kb))
    return {"lines": len(lines), "runs": runs,
            "known_median_s": round(statistics.median(t_known), 2),
            "new_median_s": round(statistics.median(t_new), 2),
            "known_cpu_median_s": round(statistics.median(cpu_known), 2),
            "new_cpu_median_s": round(statistics.median(_CPU), 2),
            "load_average": round(os.getloadavg()[0], 1),
            "known_s": [round(t, 2) for t in t_known], "new_s": [round(t, 2) for t in t_new]}


def calibrate(kb: Path, train: list[dict], normal: list[dict]) -> list[dict]:
    """Top score per excerpt at threshold 0, then the sweep."""
    top_train = [(rootcause.match_lines(e["lines"], kb=kb, top_k=1, threshold=0.0) or [{}])[0]
                 .get("similarity", 0.0) for e in train]
    top_normal = [(rootcause.match_lines(e["lines"], kb=kb, top_k=1, threshold=0.0) or [{}])[0]
                  .get("similarity", 0.0) for e in normal]
    rows = []
    for t in [x / 100 for x in range(40, 91, 5)]:
        hit = sum(s >= t for s in top_train) / max(len(top_train), 1)
        fa = sum(s >= t for s in top_normal) / max(len(top_normal), 1)
        rows.append({"threshold": t, "train_failures_matched": hit, "normal_false_alarms": fa})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=_default_data())
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--calibrate", action="store_true", help="also print the threshold sweep")
    ap.add_argument("--no-loso", action="store_true", help="skip leave-one-source-out")
    ap.add_argument("--sweep", action="store_true", help="classifier settings under leave-one-source-out")
    ap.add_argument("--timing", action="store_true", help="time `l4 kb match` through the CLI")
    ap.add_argument("--timing-only", action="store_true", help="only the CLI timing")
    ap.add_argument("--jobs", metavar="SEEDS", help="only: categories of simulated diagnosed jobs, "
                    "e.g. 0..39 (development seeds; 9000 and up are held out)")
    ap.add_argument("--realruns", type=Path, metavar="DIR", help="only: categories of diagnosed "
                    "real torchrun runs under DIR (development runs only, e.g. /work/realruns/dev)")
    ap.add_argument("--kb", type=Path, metavar="FILE", help="start from a copy of this knowledge "
                    "base (its cached embeddings; the file itself is never modified)")
    ap.add_argument("--every", type=int, default=1, metavar="N",
                    help="leave-one-source-out on every N-th pattern only (a sample, on a busy host)")
    ap.add_argument("--patterns-only", action="store_true", help="leave-one-source-out pattern "
                    "top-1 only (no fold classifiers: fast; category figures omitted)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a constant of l4.category (or rootcause.NAME) for this run")
    ap.add_argument("--no-heldout", action="store_true", help="skip the held-out excerpts "
                    "(development runs: the held-out figure is measured once, at the end)")
    ap.add_argument("--excerpts-loso", action="store_true", help="also: category of the "
                    "NON-held-out real excerpts with every pattern citing the excerpt's source left out")
    ap.add_argument("--public-lines", action="store_true", help="also: category of the "
                    "labelled public failure lines of benchmarks/kb_public_lines.yaml")
    ap.add_argument("--misses", action="store_true", help="print the leave-one-source-out "
                    "pattern misses: the first ranked pattern, the same-fault one's rank and scores")
    ap.add_argument("-v", "--verbose", action="store_true", help="per-item predictions")
    args = ap.parse_args(argv)
    # diagnosed jobs start from a fresh template store, as a new installation would (and as
    # benchmarks/accuracy.py does): never the user's own, whose history would change them
    os.environ.setdefault(
        "L4_TEMPLATES", os.path.join(tempfile.mkdtemp(prefix="l4-kb-accuracy-templates-"), "t.store")
    )
    if not args.data.is_file() and not args.public_lines:
        print(f"data not found: {args.data}", file=sys.stderr)
        return 2

    for a in args.set:  # e.g. LEXICAL_WEIGHT=0, POOL=mean, rootcause.SYMPTOM_VOTE=1
        name, _, value = a.partition("=")
        mod, _, attr = name.rpartition(".")
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        setattr(rootcause if mod == "rootcause" else category, attr, parsed)
    # the public lines are the repository's own: without ../shared only they are measured
    excerpts = load_excerpts(args.data) if args.data.is_file() else []
    labels = yaml.safe_load(LABELS.read_text())["labels"]
    failures = [e for e in excerpts if e["kind"] == "failure"]
    held = [e for e in failures if held_out(e["id"])]
    train = [e for e in failures if not held_out(e["id"])]
    normal = [e for e in excerpts if e["kind"] != "failure"]
    missing = [e["id"] for e in held if e["id"] not in labels]
    if missing:
        print(f"unlabelled held-out excerpts: {missing}", file=sys.stderr)
        return 2

    result: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        kb = Path(tmp) / "kb.duckdb"
        if args.kb:
            import shutil

            shutil.copy(args.kb, kb)
        t0 = time.perf_counter()
        rootcause.ensure_embeddings(kb)
        rootcause.category_model(kb)
        t_embed = time.perf_counter() - t0
        patterns = kbstore.list_patterns(kb=kb)
        baseline = KeywordBaseline(patterns)
        if args.jobs:
            a, _, b = args.jobs.partition("..")
            print(json.dumps(diagnosed_jobs(kb, list(range(int(a), int(b or a) + 1))), indent=2))
            return 0
        if args.realruns:
            print(json.dumps(diagnosed_realruns(kb, args.realruns), indent=2))
            return 0
        if args.timing_only:
            t = timing(kb, failures)
            print(json.dumps(t, indent=2))
            return 0

        if not args.no_loso or args.sweep or args.excerpts_loso:
            samples = rootcause.training_samples(kbstore.category_training_rows(kb=kb), kb)
        if not args.no_loso:
            t0 = time.perf_counter()
            result["loso"] = loso(kb, patterns, samples, verbose=args.verbose, every=args.every,
                                  patterns_only=args.patterns_only)
            result["loso"]["seconds"] = round(time.perf_counter() - t0, 1)
        if args.excerpts_loso:
            result["excerpts_loso"] = excerpts_loso(kb, patterns, samples, failures,
                                                    verbose=args.verbose)
        if args.public_lines:
            result["public_lines"] = public_lines(kb, patterns, verbose=args.verbose)
        if args.sweep:
            grid = [{"C": c, "SHARPNESS": sh, "MATCH_GAMMA": g}
                    for c in (1.0, 4.0, 16.0) for sh in (4.0, 12.0, 30.0) for g in (0.0, 3.0, 6.0)]
            result["sweep"] = []
            for st in grid:
                r = loso(kb, patterns, samples, settings=st)
                result["sweep"].append({**st, "category_top1": r["ours"]["category_top1"],
                                        "category_top3": r["ours"]["category_top3"]})
                print(f"sweep {st} -> {r['ours']['category_top1']:.3f}", file=sys.stderr)

        if args.no_heldout:
            held = []
        t0 = time.perf_counter()
        ours, base, ours_rank = [], [], []
        for e in held:
            lab = labels[e["id"]]
            m = rootcause.match_lines_full(e["lines"], kb=kb, top_k=3, threshold=0.0)
            cats = [c["category"] for c in m.categories]
            ranked = [r for r in m.root_causes if r["similarity"] >= rootcause.THRESHOLD]
            ours.append((lab, ranked, cats))
            ours_rank.append((lab, m.root_causes, cats))
            kw = baseline.rank(e["lines"])
            base.append((lab, kw, _cats_of(kw)))
            if args.verbose:
                got = [r["pattern_id"] for r in ranked]
                ok = "ok " if cats[0] == lab["category"] else "-- "
                print(f"{ok}{e['id']} [{lab['category']}] cat={m.categories[0]} "
                      f"want={lab['patterns'][:2]} got={got}", file=sys.stderr)
        t_match = (time.perf_counter() - t0) / max(len(held), 1)
        silent = sum(not rootcause.match_lines(e["lines"], kb=kb) for e in normal)
        sweep = calibrate(kb, train, normal) if args.calibrate else None
        if args.timing:
            result["timing"] = timing(kb, failures)

    result.update({
        "split": {"salt": SALT, "held_out": len(held), "train": len(train), "normal": len(normal)},
        "threshold": rootcause.THRESHOLD,
        "kb_match": _metrics(ours),
        "kb_match_no_threshold": _metrics(ours_rank),
        "keyword_baseline": _metrics(base),
        "normal_silence": {"n": len(normal), "silent": silent, "rate": silent / max(len(normal), 1),
                           "keyword_baseline_rate": 0.0},
        "normal_false_alarms": {"n": len(normal), "with_suggestion": len(normal) - silent},
        "patterns": len(patterns),
        "seconds": {"embed_library": round(t_embed, 2), "match_per_excerpt": round(t_match, 3)},
    })
    if sweep is not None:
        result["calibration"] = sweep
    result["show_misses"] = args.misses
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    _print_text(result, sweep)
    return 0


def _default_data() -> Path:
    """../shared next to the checkout, else $L4_SHARED (a git worktree lives elsewhere)."""
    for base in (ROOT.parent / "shared", Path(os.environ.get("L4_SHARED", "/nonexistent"))):
        p = base / "data" / "real-failures.jsonl"
        if p.is_file():
            return p
    return ROOT.parent / "shared" / "data" / "real-failures.jsonl"


def _print_text(result: dict, sweep: list | None) -> None:
    print(f"library: {result['patterns']} patterns, threshold {result['threshold']}")
    if "loso" in result:
        lo = result["loso"]
        print(f"leave-one-source-out: {lo['n']} patterns ({lo['n_pattern_exists']} with the same "
              f"fault from another source), {lo['seconds']} s")
        print(f"{'':28}{'cat top1':>9}{'cat top3':>9}{'pat top1*':>10}{'ranked 1':>9}{'ranked 3':>9}")
        for name in ("ours", "keyword_baseline"):
            m = lo[name]
            r1 = f"{m['pattern_top1_ranked']:9.1%}" if "pattern_top1_ranked" in m else f"{'-':>9}"
            r3 = f"{m['pattern_top3_ranked']:9.1%}" if "pattern_top3_ranked" in m else f"{'-':>9}"
            if lo.get("patterns_only"):
                print(f"{name:28}{'-':>9}{'-':>9}{m['pattern_top1_where_exists']:10.1%}{r1}{r3}")
                continue
            print(f"{name:28}{m['category_top1']:9.1%}{m['category_top3']:9.1%}"
                  f"{m['pattern_top1_where_exists']:10.1%}{r1}{r3}")
        print("  * first suggestion shown (score >= threshold) is the same fault; ranked: the "
              "first of all patterns, whatever its score")
        if result.get("show_misses"):
            print("  pattern misses (first shown is not the same fault):")
            print(f"  {'pattern':38} {'first ranked':38} {'score':>6} {'same-fault':38} "
                  f"{'rank':>4} {'score':>6}")
            for r in lo["pattern_misses"]:
                print(f"  {r['pattern'][:38]:38} {str(r['first'])[:38]:38} {r['first_score']:6.3f} "
                      f"{','.join(r['same_fault'])[:38]:38} {r['same_fault_rank']:4d} "
                      f"{r['same_fault_score']:6.3f}")
        if not lo.get("patterns_only") and lo["ours"].get("calibration"):
            c = lo["ours"]["calibration"]
            print(f"  confidence: ECE {c['ece']:.3f}, mean top confidence when right "
                  f"{c['mean_confidence_right']:.2f}, when wrong {c['mean_confidence_wrong']:.2f}, "
                  f"NLL {c['nll']:.3f}")
        if not lo.get("patterns_only"):
            print("  category top-1 by category: " + ", ".join(
                f"{k} {v:.0%}" for k, v in lo["ours"]["category_top1_by_category"].items()))
    for key, label in (("public_lines", "public failure lines never read"),
                       ("excerpts_loso", "real excerpts, leave-source-out (non-held-out with a category)")):
        if key in result:
            x = result[key]
            print(f"{label}, {x['n']}: category top-1 {x['category_top1']:.1%}, top-3 "
                  f"{x['category_top3']:.1%} (keyword baseline {x['keyword_baseline_top1']:.1%}, "
                  f"{x['keyword_baseline_top3']:.1%}); " + ", ".join(
                      f"{k} {v:.0%}" for k, v in x["category_top1_by_category"].items()))
    if result["split"]["held_out"]:
        km = result["kb_match"]
        print(f"held-out excerpts: {km['n']} ({km['n_with_pattern']} with a labelled pattern)")
        print(f"{'':28}{'cat top1':>9}{'cat top3':>9}{'pat top1':>9}{'pat top3':>9}")
        for name in ("kb_match", "kb_match_no_threshold", "keyword_baseline"):
            m = result[name]
            print(f"{name:28}{m['category_top1']:9.1%}{m['category_top3']:9.1%}"
                  f"{m['pattern_top1']:9.1%}{m['pattern_top3']:9.1%}")
    ns = result["normal_silence"]
    if ns["n"]:
        print(f"normal excerpts with no suggestion: {ns['silent']}/{ns['n']} ({ns['rate']:.1%}; "
              f"keyword baseline 0%)")
    sec = result["seconds"]
    print(f"library embedding {sec['embed_library']:.1f} s (incl. model load), "
          f"match {sec['match_per_excerpt'] * 1000:.0f} ms/excerpt")
    if "timing" in result:
        t = result["timing"]
        print(f"`l4 kb match`, {t['lines']} lines, new process, median of {t['runs']}: "
              f"known text {t['known_median_s']} s (CPU {t['known_cpu_median_s']} s), new text "
              f"{t['new_median_s']} s (CPU {t['new_cpu_median_s']} s); load average {t['load_average']}")
    if "sweep" in result:
        for r in result["sweep"]:
            print(f"  C={r['C']:<5} sharpness={r['SHARPNESS']:<5} gamma={r['MATCH_GAMMA']:<4} "
                  f"cat top1 {r['category_top1']:.1%} top3 {r['category_top3']:.1%}")
    if sweep:
        print("threshold sweep (non-held-out failures vs normal excerpts):")
        for r in sweep:
            print(f"  {r['threshold']:.2f}  failures matched {r['train_failures_matched']:6.1%}  "
                  f"false alarms {r['normal_false_alarms']:6.1%}")


if __name__ == "__main__":
    raise SystemExit(main())
