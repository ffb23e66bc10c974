"""Accuracy of ``l4 kb match`` on held-out real failure excerpts, against a keyword baseline.

    .venv/bin/python benchmarks/kb_accuracy.py [--data PATH] [--json] [--calibrate]

Split: a failure excerpt of real-failures.jsonl is held out when
``int(sha256(SALT + id), 16) % 10 < 3`` (28 of 91).  The seed library was written from
the other excerpts and vendor documentation; the held-out ones are labelled in
``benchmarks/kb_heldout_labels.yaml``.  Reported:

* category top-1 / top-3 over all held-out excerpts (no suggestion counts as a miss);
* pattern top-1 / top-3 over the held-out excerpts whose lines show a labelled pattern;
* the same for a keyword baseline (pattern keywords = words of title, indicators, codes;
  score = distinct keywords present / sqrt(#keywords); it always guesses);
* how many normal (successful-run) excerpts get a suggestion (false alarms);
* with --calibrate: the threshold sweep on the NON-held-out failure excerpts (should get
  a suggestion) vs the normal excerpts (should not), which is how THRESHOLD was chosen.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from l4 import kbstore, rootcause  # noqa: E402

SALT = "l4-kb-heldout-v1"
LABELS = ROOT / "benchmarks" / "kb_heldout_labels.yaml"
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


def _metrics(results: list[tuple[dict, list[dict]]]) -> dict:
    cat1 = cat3 = pat1 = pat3 = n_pat = 0
    for label, ranked in results:
        cats = [r["category"] for r in ranked]
        pids = [r["pattern_id"] for r in ranked]
        cat1 += bool(cats) and cats[0] == label["category"]
        cat3 += label["category"] in cats[:3]
        if label["patterns"]:
            n_pat += 1
            pat1 += bool(pids) and pids[0] in label["patterns"]
            pat3 += any(p in label["patterns"] for p in pids[:3])
    n = len(results)
    return {
        "n": n, "n_with_pattern": n_pat,
        "category_top1": cat1 / n, "category_top3": cat3 / n,
        "pattern_top1": pat1 / max(n_pat, 1), "pattern_top3": pat3 / max(n_pat, 1),
    }


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
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "real-failures.jsonl")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--calibrate", action="store_true", help="also print the threshold sweep")
    ap.add_argument("-v", "--verbose", action="store_true", help="per-excerpt predictions")
    args = ap.parse_args(argv)
    if not args.data.is_file():
        print(f"data not found: {args.data}", file=sys.stderr)
        return 2

    excerpts = load_excerpts(args.data)
    labels = yaml.safe_load(LABELS.read_text())["labels"]
    failures = [e for e in excerpts if e["kind"] == "failure"]
    held = [e for e in failures if held_out(e["id"])]
    train = [e for e in failures if not held_out(e["id"])]
    normal = [e for e in excerpts if e["kind"] != "failure"]
    missing = [e["id"] for e in held if e["id"] not in labels]
    if missing:
        print(f"unlabelled held-out excerpts: {missing}", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory() as tmp:
        kb = Path(tmp) / "kb.duckdb"
        t0 = time.perf_counter()
        rootcause.ensure_embeddings(kb)
        t_embed = time.perf_counter() - t0
        patterns = kbstore.list_patterns(kb=kb)
        baseline = KeywordBaseline(patterns)

        t0 = time.perf_counter()
        ours, base, ours_rank = [], [], []
        for e in held:
            lab = labels[e["id"]]
            ranked_all = rootcause.match_lines(e["lines"], kb=kb, top_k=3, threshold=0.0)
            ranked = [r for r in ranked_all if r["similarity"] >= rootcause.THRESHOLD]
            ours.append((lab, ranked))
            ours_rank.append((lab, ranked_all))
            base.append((lab, baseline.rank(e["lines"])))
            if args.verbose:
                got = [r["pattern_id"] for r in ranked]
                ok = "ok " if got and got[0] in lab["patterns"] else "-- "
                print(f"{ok}{e['id']} want={lab['patterns'][:2]} got={got} "
                      f"sims={[r['similarity'] for r in ranked]}", file=sys.stderr)
        t_match = (time.perf_counter() - t0) / max(len(held), 1)
        false_alarms = sum(bool(rootcause.match_lines(e["lines"], kb=kb)) for e in normal)
        sweep = calibrate(kb, train, normal) if args.calibrate else None

    result = {
        "split": {"salt": SALT, "held_out": len(held), "train": len(train), "normal": len(normal)},
        "threshold": rootcause.THRESHOLD,
        "kb_match": _metrics(ours),
        "kb_match_no_threshold": _metrics(ours_rank),
        "keyword_baseline": _metrics(base),
        "normal_false_alarms": {"n": len(normal), "with_suggestion": false_alarms},
        "patterns": len(patterns),
        "seconds": {"embed_library": round(t_embed, 2), "match_per_excerpt": round(t_match, 3)},
    }
    if sweep is not None:
        result["calibration"] = sweep
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"held-out excerpts: {len(held)} ({result['kb_match']['n_with_pattern']} with a labelled "
          f"pattern), seed patterns: {len(patterns)}, threshold {rootcause.THRESHOLD}")
    print(f"{'':28}{'cat top1':>9}{'cat top3':>9}{'pat top1':>9}{'pat top3':>9}")
    for name in ("kb_match", "kb_match_no_threshold", "keyword_baseline"):
        m = result[name]
        print(f"{name:28}{m['category_top1']:9.1%}{m['category_top3']:9.1%}"
              f"{m['pattern_top1']:9.1%}{m['pattern_top3']:9.1%}")
    print(f"normal excerpts with a suggestion (false alarms): {false_alarms}/{len(normal)}")
    print(f"library embedding {t_embed:.1f} s (incl. model load), match {t_match * 1000:.0f} ms/excerpt")
    if sweep:
        print("threshold sweep (non-held-out failures vs normal excerpts):")
        for r in sweep:
            print(f"  {r['threshold']:.2f}  failures matched {r['train_failures_matched']:6.1%}  "
                  f"false alarms {r['normal_false_alarms']:6.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
