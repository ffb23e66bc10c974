"""How big the HTML report of a large job is and how fast headless Chromium renders it; and
the screenshots in docs/.

    python benchmarks/html_render.py                  # 256-node job: size and render time
    python benchmarks/html_render.py --nodes 64 --runs 5
    python benchmarks/html_render.py --screenshots docs   # docs/report-*.png (uses the KB)

Render time is wall clock from navigation to the load event plus one animation frame (the
page has no script, so that is parsing, style, layout and the first paint), in a fresh
page, median of ``--runs``.  Targets (issue 12): <= 2 MB and <= 2 s for 256 nodes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from chromium import PAGE_CHECK, Chromium, find_chromium  # noqa: E402

from l4.engine import diagnose  # noqa: E402
from l4.htmlreport import write_html  # noqa: E402
from l4.sim.simulate import simulate_case  # noqa: E402

#: two different failures for docs/ (development seeds): a slow node in training on
#: MindSpeed, a segfault in a 64-node torchtitan job
DOC_CASES = ((25, "report-slow-node"), (23, "report-segfault-64-nodes"))


def measure(nodes: int, runs: int, seed: int) -> int:
    with tempfile.TemporaryDirectory(prefix="l4-html-") as tmp:
        t0 = time.perf_counter()
        simulate_case(Path(tmp) / "case", seed, n_nodes=nodes, n_baselines=1, framework="megatron")
        case = Path(tmp) / "case"
        rep = diagnose(case / "failed", [case / "baseline-0"], store_path=False)
        t1 = time.perf_counter()
        path = write_html(rep, Path(tmp) / "report.html")
        t2 = time.perf_counter()
        size = path.stat().st_size
        loads, errors = [], []
        for _ in range(runs):
            with Chromium() as browser:  # a fresh browser each run: nothing cached
                res = browser.load(path, PAGE_CHECK)
            loads.append(res.load_s)
            errors += res.exceptions + res.console_errors
            svgs = res.value["svgs"]
    med = statistics.median(loads)
    print(f"job: {nodes} nodes, {rep['stats']['lines']} lines (simulated seed {seed}); "
          f"diagnosis {t1 - t0:.1f} s, rendering the HTML {1000 * (t2 - t1):.0f} ms")
    print("| what | measured | target |\n|---|---|---|")
    print(f"| report size | {size / 1024:.0f} KB | <= 2048 KB |")
    print(f"| render in headless Chromium (median of {runs}) | {med:.2f} s "
          f"(min {min(loads):.2f}, max {max(loads):.2f}) | <= 2 s |")
    print(f"| charts | {len(svgs)} SVG, {sum(s['shapes'] for s in svgs)} shapes | |")
    print(f"| script errors | {len(errors)} | 0 |")
    ok = size <= 2 << 20 and med <= 2.0 and not errors
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def screenshots(out: Path) -> int:
    from l4.pipeline import diagnose_and_record

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="l4-docs-") as tmp:
        kb = Path(tmp) / "kb.duckdb"
        for seed, name in DOC_CASES:
            case = Path(tmp) / f"case{seed}"
            truth = simulate_case(case, seed)
            rep = diagnose_and_record(case / "failed", [case / "baseline-0", case / "baseline-1"],
                                      kb=kb, templates=Path(tmp) / "t.drain3")
            html = write_html(rep, Path(tmp) / f"{name}.html")
            with Chromium(width=1150, height=1800) as browser:
                res = browser.load(html, PAGE_CHECK, screenshot=True, full_page=False)
            (out / f"{name}.png").write_bytes(res.screenshot)
            print(f"{out / name}.png: seed {seed}, {truth['fault']['id']}, culprit "
                  f"{rep['nodes'][0]['node']} (truth {', '.join(truth['faulty_nodes'])})")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--screenshots", type=Path, default=None, metavar="DIR")
    args = ap.parse_args()
    if find_chromium() is None:
        print("chromium not found (apt-get install chromium)", file=sys.stderr)
        return 2
    if args.screenshots:
        return screenshots(args.screenshots)
    return measure(args.nodes, args.runs, args.seed)


if __name__ == "__main__":
    sys.exit(main())
