"""A node that wrote several files: ``.out`` and ``.err``, per-rank files, a rotated part.

Why: Slurm's ``--output``/``--error``, torchrun's ``--log-dir`` and a kubelet's sidecar
containers give each node more than one file.  Read one node per file, a node's stdout
and stderr were two "nodes" (``n1`` and ``n1@logs/n1.err``): the stderr half, with the
traceback, was compared with other nodes' stderr halves, the ranking named a node that does
not exist, and the paper's baselines listed nodes twice.  Now the files of one node are
read as one stream, the node's last words last, and every line keeps its own file and
line number.
"""

from __future__ import annotations

import gzip
import json
import re
import tarfile
from pathlib import Path

import pytest

from l4.baselines import error_count_ranking, error_time_ranking, is_error_line
from l4.engine import diagnose
from l4.ingest import discover
from l4.sim.simulate import simulate_case
from l4.wrapped import unwrap_lines

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "split"
_FRAME = re.compile(r"^\s+(File \"|\^|\S.*\(.*\)$)|^Traceback \(most recent call last\):")


def _read(path: Path) -> list[str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        return fh.read().split("\n")[:-1]


def _split_streams(job: Path) -> None:
    """Each node file as a program's two streams: error-level lines and tracebacks to
    ``.err``, the rest to ``.out`` (what Slurm's --output/--error would hold)."""
    for path in sorted((job / "logs").rglob("*")):
        if not path.is_file():
            continue
        out, err, in_tb = [], [], False
        for line in _read(path):
            in_tb = line.startswith("Traceback") or (in_tb and bool(_FRAME.match(line)))
            (err if in_tb or is_error_line(line) else out).append(line)
        stem = path.name.split(".")[0]
        path.unlink()
        (path.parent / f"{stem}.out").write_text("".join(x + "\n" for x in out))
        (path.parent / f"{stem}.err").write_text("".join(x + "\n" for x in err))


def test_a_nodes_stdout_and_stderr_are_one_node(tmp_path):
    truth = simulate_case(tmp_path / "case", 17, framework="megatron", n_nodes=6,
                          iterations=60, gzip_some=False)
    case = tmp_path / "case"
    bases = [case / b for b in truth["baselines"]]
    whole = diagnose(case / "failed", baselines=bases, store_path=False)
    for job in [case / "failed", *bases]:
        _split_streams(job)
    spec = discover(case / "failed")
    assert len(spec.files) == 12 and len({f.node for f in spec.files}) == 6
    assert any("wrote several files" in w for w in spec.warnings)
    split = diagnose(case / "failed", baselines=bases, store_path=False)
    names = [n["node"] for n in split["nodes"]]
    assert sorted(names) == sorted({f.node for f in spec.files})  # each node once, no "@"
    assert names[0] == whole["nodes"][0]["node"] in truth["faulty_nodes"]
    assert split["stage"] == whole["stage"] == truth["stage"]
    # each example points at its own file's line, .out or .err
    shown = [ex for e in split["events"][:8] for ex in e["examples"][:2]]
    assert any(ex["file"].endswith(".err") for ex in shown)
    # the report lists every file it read, each with its own node and line count
    listed = {f["file"]: f for f in split["files"]}
    assert sorted(listed) == sorted(f.rel for f in spec.files)
    for f in spec.files:
        assert listed[f.rel]["node"] == f.node
        assert listed[f.rel]["lines"] == len(_read(case / "failed" / f.rel))
    for ex in shown:  # (as printed: a kubectl --timestamps prefix is not the program's)
        lines = unwrap_lines(_read(case / "failed" / ex["file"]))
        assert lines[ex["line"] - 1][:300] == ex["text"][:300]


def test_the_papers_baselines_rank_each_node_once(tmp_path):
    logs = tmp_path / "job" / "logs"
    logs.mkdir(parents=True)
    (logs / "a.out").write_text("2024-01-01 00:00:05 step 1\n")
    (logs / "a.err").write_text("2024-01-01 00:00:09 ERROR: a failed\n")
    (logs / "b.out").write_text("2024-01-01 00:00:07 ERROR: b timed out\n2024-01-01 00:00:08 ERROR: again\n")
    (logs / "b.err").write_text("2024-01-01 00:00:03 ERROR: b early\n")
    (logs / "c.log").write_text("2024-01-01 00:00:04 fine\n")
    assert error_time_ranking(tmp_path / "job") == ["b", "a", "c"]
    assert error_count_ranking(tmp_path / "job") == ["b", "a", "c"]


def test_per_rank_files_under_each_nodes_directory_are_that_node(tmp_path):
    # torchrun --log-dir, collected per host: <host>/attempt_0/<local rank>/stdout.log
    for host in ("gpu-a1", "gpu-a2"):
        for rank in range(2):
            for stream in ("stdout", "stderr"):
                d = tmp_path / "job" / "logs" / host / "attempt_0" / str(rank)
                d.mkdir(parents=True, exist_ok=True)
                (d / f"{stream}.log").write_text(f"{host} rank {rank} {stream}\n")
    spec = discover(tmp_path / "job")
    assert sorted({f.node for f in spec.files}) == ["gpu-a1", "gpu-a2"]
    assert len(spec.files) == 8


def _fixtures() -> list[str]:
    return sorted(p.name.removesuffix(".tar.xz") for p in FIXTURES.glob("*.tar.xz"))


@pytest.mark.parametrize("name", _fixtures())
def test_a_real_run_with_stdout_and_stderr_apart_is_diagnosed(tmp_path, name):
    """Real torchrun jobs whose launchers' stdout and stderr went to two files per node
    (benchmarks/realruns ``--runtime split``), as Slurm's --output/--error write them."""
    with tarfile.open(FIXTURES / f"{name}.tar.xz", "r:xz") as tar:
        tar.extractall(tmp_path, filter="data")
    case = tmp_path / name
    truth = json.loads((case / "truth.json").read_text())
    assert truth["style"]["runtime"] == "split"
    assert {p.suffix for p in (case / "failed" / "logs").iterdir()} == {".out", ".err"}
    report = diagnose(case / "failed", baselines=[case / b for b in truth["baselines"]],
                      store_path=False)
    assert report["nodes"][0]["node"] == truth["faulty_nodes"][0]
    assert len(report["nodes"]) == truth["n_nodes"]
    assert report["stage"] == truth["stage"]
    if truth["iteration"] is not None:
        assert any(abs(i["iteration"] - truth["iteration"]) <= 1 for i in report["iterations"][:3])
    wanted = {(i["file"], i["line"]) for i in truth["indicators"]}
    shown = {(ex["file"], ex["line"]) for e in report["events"] for ex in e["examples"]}
    assert not wanted or wanted & shown  # an indicator line is reported where it is
