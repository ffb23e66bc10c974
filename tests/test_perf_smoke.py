"""The performance benchmark runs and reports every figure; the fast path groups Loghub lines
like plain drain3.  No timing is asserted here: speed is what ``benchmarks/perf.py`` prints."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PERF = REPO / "benchmarks" / "perf.py"
LOGHUB = REPO.parent / "shared" / "data" / "loghub-2k"


def _perf():
    """benchmarks/ is not a package: load perf.py once, registered so its dataclasses work."""
    name = "l4_bench_perf"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, PERF)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def test_benchmark_smallest_size_prints_every_figure(tmp_path):
    out = tmp_path / "perf.json"
    cmd = [sys.executable, str(PERF), "--sizes", "2x40KB,3x40KB", "--sample", "1500",
           "--work", str(tmp_path / "work"), "--json", str(out)]
    have_loghub = (LOGHUB / "HDFS" / "HDFS_2k.log").exists()
    cmd += ["--loghub-datasets", "Apache", "--loghub", str(LOGHUB)] if have_loghub else [
        "--no-loghub"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = proc.stdout
    for heading in ("Parse throughput on the same sample", "Fast path on whole files",
                    "Grouping agreement on the sample", "End to end: l4 diagnose",
                    "Growth between sizes", "linear fit", "Targets (issue)"):
        assert heading in text, f"missing section {heading!r}\n{text}"
    fig = json.loads(out.read_text())
    s = fig["parse"]["sample"]
    for path in ("fast", "fast_bare", "plain_l4", "plain_bare"):
        assert s[path]["lines_per_s"] > 0
    assert s["speedup_vs_plain_l4"] > 0 and s["speedup_vs_plain_bare"] > 0
    assert 0.0 <= s["agreement_fast_plain_l4"] <= 1.0
    assert fig["parse"]["file"]["lines_per_s"] > 0
    assert {j["workers"] for j in fig["parse"]["job"]} == {1, 2}
    rows = fig["end_to_end"]
    assert [r["size"] for r in rows] == ["2x40KB", "3x40KB"]
    for r in rows:
        assert r["rc"] == 0, r.get("error")
        assert r["wall_s"] > 0 and r["lines_per_s"] > 0 and r["input_lines"] > 0
        assert r["peak_tree_rss_mb"] > 10  # a Python process with numpy is never smaller
        assert r["scan_s"] is not None and r["analyze_s"] is not None
    assert len(fig["growth"]["steps"]) == 1 and fig["growth"]["fit"] is not None
    assert {t["target"] for t in fig["targets"]} >= {
        "fast path >= 50x plain drain3 (sample)", "peak RSS < 2 GB (largest over sizes, process tree)"}
    if have_loghub:
        assert "Loghub-2k: grouping accuracy" in text
        (row,) = fig["loghub"]
        assert row["dataset"] == "Apache" and 0 <= row["ga_fast"] <= 1
    # generated jobs are removed unless --keep
    assert not list((tmp_path / "work").glob("job-*"))


def test_bad_size_is_a_clear_error(tmp_path):
    proc = subprocess.run([sys.executable, str(PERF), "--sizes", "64xlots", "--work",
                           str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "bad size '64xlots'" in proc.stderr and "Traceback" not in proc.stderr


def test_grouping_accuracy_is_loghubs_definition():
    ga = _perf().grouping_accuracy
    assert ga(["a", "a", "b"], [1, 1, 2]) == 1.0
    # a merged group makes all its lines wrong; the untouched group stays right
    assert ga(["a", "a", "b", "c"], [1, 1, 1, 2]) == pytest.approx(0.25)
    # a split group makes its lines wrong
    assert ga(["a", "a", "b"], [1, 2, 3]) == pytest.approx(1 / 3)
    assert ga([], []) == 1.0


def test_loghub_formats_cut_out_the_ground_truth_content(shared_dir):
    import csv

    sys.path.insert(0, str(REPO / "benchmarks"))
    from loghub_formats import LOG_FORMATS, log_format

    base = shared_dir / "loghub-2k"
    for dataset in LOG_FORMATS:
        log = base / dataset / f"{dataset}_2k.log"
        if not log.exists():
            continue
        fmt = log_format(dataset)
        with open(base / dataset / f"{dataset}_2k.log_structured.csv", newline="",
                  encoding="utf-8") as fh:
            truth = [r["Content"] for r in csv.DictReader(fh)]
        lines = log.read_bytes().decode("utf-8", "replace").rstrip("\n").split("\n")
        assert [fmt.content(x) for x in lines] == truth, dataset
    with pytest.raises(ValueError, match="no Loghub log format"):
        log_format("NoSuchSystem")


@pytest.mark.parametrize("dataset", [
    "Spark",
    "Zookeeper",
    "HDFS",
    "HealthApp",
    "BGL",
])
def test_fast_path_groups_loghub_lines_like_plain_drain3(shared_dir, tmp_path, dataset):
    perf = _perf()
    row = perf.loghub_one(shared_dir / "loghub-2k", dataset, tmp_path)
    assert "error" not in row, row.get("error")
    assert row["content_as_truth"] == 1.0
    assert row["agreement"] >= 0.99
    assert row["ga_fast"] >= row["ga_plain"]
