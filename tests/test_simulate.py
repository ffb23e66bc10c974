"""The job simulator: deterministic, truthful about what it wrote, and hard in the right ways."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from l4.baselines import error_count_ranking, is_error_line
from l4.sim import simdata as D
from l4.sim.simulate import list_faults, list_frameworks, simulate_case, simulate_suite


def read_lines(path: Path) -> list[str]:
    if path.name.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    else:
        text = path.read_bytes().decode("utf-8", errors="replace")
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def node_files(job: Path) -> dict[str, Path]:
    """node id (file name without log/compression suffixes) -> path."""
    out = {}
    for p in (job / "logs").rglob("*"):
        if p.is_file():
            out[re.sub(r"(\.log|\.out)(\.gz)?$", "", p.name)] = p
    return out


def _fragments(template: str) -> list[str]:
    """Literal parts of a template, longest first (what any rendering must contain)."""
    parts = re.split(r"\{[^{}]*\}", template.replace("{{", "{").replace("}}", "}"))
    return sorted((p.strip() for p in parts if len(p.strip()) >= 6), key=len, reverse=True)


def _kind_templates() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for b in D.BLOCKS.values():
        for _stream, key, tmpl in b.lines:
            if key:
                out.setdefault(b.kind, []).append(tmpl)
    # the launcher's report of a SIGKILL is the only evidence of a host OOM kill
    for bid in ("child_failed", "ds_exit_code", "srun_task_signal"):
        out.setdefault("sigkill_exit", []).extend(t for _s, k, t in D.BLOCKS[bid].lines if k)
    return out


KIND_TEMPLATES = _kind_templates()


def assert_truthful(case: Path, truth: dict) -> None:
    """Every truth line exists and says what its kind says."""
    failed = case / "failed"
    cache: dict[str, list[str]] = {}
    for role in ("indicators", "symptoms"):
        for item in truth[role]:
            lines = cache.get(item["file"])
            if lines is None:
                lines = cache[item["file"]] = read_lines(failed / item["file"])
            assert 1 <= item["line"] <= len(lines), item
            kind = item["kind"]
            if kind.endswith(":context"):
                continue
            text = lines[item["line"] - 1]
            frags = [f for t in KIND_TEMPLATES.get(kind, []) for f in _fragments(t)[:1]]
            assert frags, f"no template known for kind {kind}"
            assert any(f in text for f in frags), (kind, text, frags)


def baseline_lines(case: Path, truth: dict) -> list[str]:
    out = []
    for b in truth["baselines"]:
        for p in node_files(case / b).values():
            out.extend(read_lines(p))
    return out


@pytest.fixture(scope="module")
def small_case(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("case")
    truth = simulate_case(out, 7, framework="megatron", fault="cuda_oom", n_nodes=6, iterations=40)
    return out, truth


def test_layout_and_metadata(small_case):
    out, truth = small_case
    assert (out / "truth.json").exists()
    assert json.loads((out / "truth.json").read_text()) == truth
    meta = json.loads((out / "failed" / "job.json").read_text())
    assert meta["status"] == "failed" and meta["config_id"] == truth["config_id"]
    assert meta["framework"] == "megatron" and meta["job_id"] == truth["job_id"]
    assert set(truth["faulty_nodes"]) <= set(node_files(out / "failed"))
    assert truth["fault"]["id"] == "cuda_oom" and truth["fault"]["category"] == "user"
    assert truth["fault"]["source"] and truth["fault"]["root_cause"]
    assert len(node_files(out / "failed")) == truth["n_nodes"] == 6


def test_deterministic(tmp_path):
    a = simulate_case(tmp_path / "a", 123, n_nodes=5, iterations=40)
    b = simulate_case(tmp_path / "b", 123, n_nodes=5, iterations=40)
    assert a == b
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert files_a == files_b
    for rel in files_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_other_seed_other_case(tmp_path):
    a = simulate_case(tmp_path / "a", 1, n_nodes=4, iterations=30, fault="hang")
    b = simulate_case(tmp_path / "b", 2, n_nodes=4, iterations=30, fault="hang")
    assert (a["job_id"], a["faulty_nodes"]) != (b["job_id"], b["faulty_nodes"])


def test_indicators_point_at_fault_text(small_case):
    out, truth = small_case
    assert_truthful(out, truth)
    keys = [i for i in truth["indicators"] if not i["kind"].endswith(":context")]
    assert keys and all(i["kind"] == "cuda_oom" for i in keys)
    text = read_lines(out / "failed" / keys[0]["file"])[keys[0]["line"] - 1]
    assert "CUDA out of memory" in text
    culprit_files = {p for n, p in node_files(out / "failed").items() if n in truth["faulty_nodes"]}
    assert {out / "failed" / i["file"] for i in keys} <= culprit_files


def test_baselines_share_config_and_are_clean(small_case):
    out, truth = small_case
    assert truth["baselines"]
    for b in truth["baselines"]:
        meta = json.loads((out / b / "job.json").read_text())
        assert meta["config_id"] == truth["config_id"] and meta["status"] == "succeeded"
        assert meta["job_id"] != truth["job_id"]
    lines = baseline_lines(out, truth)
    assert len(lines) > 500
    hits = [ln for ln in lines for m in D.FAULT_MARKERS if m in ln]
    assert not hits, hits[:3]


def test_baselines_finish_the_run(small_case):
    out, truth = small_case
    text = "\n".join(baseline_lines(out, truth))
    assert "[after training is done]" in text  # Megatron's finalization marker
    assert "successfully saved checkpoint" in text


def test_training_fault_iteration_is_first_unfinished(small_case):
    """Megatron prints iteration N at its end; a fault during N+1 means N+1 never prints."""
    out, truth = small_case
    assert truth["stage"] == "training" and isinstance(truth["iteration"], int)
    printed = []
    for p in node_files(out / "failed").values():
        printed += [int(m.group(1)) for m in re.finditer(r" iteration\s+(\d+)/", "\n".join(read_lines(p)))]
    assert printed and max(printed) == truth["iteration"] - 1


@pytest.mark.parametrize("framework,pattern", [
    ("torchtitan", r"step:\s+(\d+)\s"),
    ("deepspeed", r"\] step=(\d+),"),
    ("hf", r"(?m)(?:^|[\]:Z] ?)\s*\d{1,3}%\|.{10}\| (\d+)/\d+ \[[\d:]+<[\d:]+, [\d.]+s/it\]$"),
])
def test_iteration_semantics_other_frameworks(tmp_path, framework, pattern):
    fault = "segfault" if framework != "deepspeed" else "cuda_oom"
    for seed in range(6):
        truth = simulate_case(tmp_path / str(seed), seed, framework=framework, fault=fault, n_nodes=3,
                              iterations=40, n_baselines=0)
        if truth["stage"] != "training":
            continue
        printed = []
        for p in node_files(tmp_path / str(seed) / "failed").values():
            printed += [int(x) for x in re.findall(pattern, "\n".join(read_lines(p)))]
        assert printed and max(printed) == truth["iteration"] - 1
        return
    pytest.skip("no training-stage case among the seeds tried")


def _one_framework(fault: str) -> str:
    fws = D.FAULTS[fault].frameworks
    return fws[len(fault) % len(fws)]


@pytest.mark.parametrize("fault", list_faults())
def test_every_fault_generates(tmp_path, fault):
    fw = _one_framework(fault)
    truth = simulate_case(tmp_path, 11, framework=fw, fault=fault, n_nodes=4, iterations=60, n_baselines=1)
    assert truth["fault"]["id"] == fault
    assert truth["stage"] in D.STAGES
    assert (truth["iteration"] is None) == (truth["stage"] != "training")
    assert_truthful(tmp_path, truth)
    spec = D.FAULTS[fault]
    if spec.mode in ("hang", "slow") and not spec.blocks:
        assert truth["indicators"] == []  # anomalies without an error line
        assert truth["symptoms"]
    else:
        assert any(not i["kind"].endswith(":context") for i in truth["indicators"]), fault
    hits = [ln for ln in baseline_lines(tmp_path, truth) for m in D.FAULT_MARKERS if m in ln]
    assert not hits, hits[:3]


def test_fault_catalogue_breadth():
    faults = [D.FAULTS[f] for f in list_faults()]
    assert len(faults) >= 20
    assert {f.category for f in faults} == set(D.CATEGORIES)
    stages = {s for f in faults for s, _w in f.stages}
    assert stages == set(D.STAGES)
    assert {f.mode for f in faults} >= {"hang", "slow"}
    for f in faults:
        assert f.source, f.id
        assert set(f.frameworks) <= set(list_frameworks())
    for b in D.BLOCKS.values():
        assert b.source, b.id


@pytest.mark.parametrize("framework", list_frameworks())
def test_every_framework_generates(tmp_path, framework):
    fault = next(f for f in list_faults() if framework in D.FAULTS[f].frameworks
                 and D.FAULTS[f].mode == "crash" and "training" in dict(D.FAULTS[f].stages))
    truth = simulate_case(tmp_path, 3, framework=framework, fault=fault, n_nodes=3, iterations=40)
    assert truth["framework"] == framework
    assert_truthful(tmp_path, truth)
    text = "\n".join(ln for p in node_files(tmp_path / "baseline-0").values() for ln in read_lines(p))
    marker = {"megatron": "iteration", "mindspeed": "iteration", "deepspeed": "RunningAvgSamplesPerSec",
              "hf": "***** Running training *****", "torchtitan": "[titan]"}[framework]
    assert marker in text


def test_propagation_outnumbers_the_culprit(tmp_path):
    """After a single-node failure the victims print more error lines than the culprit."""
    single = [f for f in list_faults() if D.FAULTS[f].culprits == "one"
              and D.FAULTS[f].mode in ("crash", "hang", "silent")]
    outnumbered = total = 0
    for seed in range(16):
        fault = single[seed % len(single)]
        fw = D.FAULTS[fault].frameworks[seed % len(D.FAULTS[fault].frameworks)]
        case = tmp_path / str(seed)
        truth = simulate_case(case, seed, framework=fw, fault=fault, n_nodes=6, iterations=40, n_baselines=0)
        counts = {}
        for node, p in node_files(case / "failed").items():
            counts[node] = sum(1 for ln in read_lines(p) if is_error_line(ln))
        culprit = truth["faulty_nodes"][0]
        victims = [c for n, c in counts.items() if n != culprit]
        total += 1
        outnumbered += max(victims) > counts[culprit]
        ranking = error_count_ranking(case / "failed")
        assert sorted(ranking) == sorted(counts)
    assert outnumbered / total >= 0.6, (outnumbered, total)


def test_decoys_stay_off_the_culprit(tmp_path):
    texts = [_fragments(t)[0] for _i, _s, t, _st in D.DECOYS]
    seen = 0
    for seed in range(8):
        case = tmp_path / str(seed)
        truth = simulate_case(case, seed, n_nodes=4, iterations=30, n_baselines=0)
        for node, p in node_files(case / "failed").items():
            hits = [ln for ln in read_lines(p) if any(x in ln for x in texts)]
            seen += bool(hits)
            if node in truth["faulty_nodes"]:
                assert not hits, (node, hits[:2])
    assert seen


def test_gzip_and_layout(tmp_path):
    truth = simulate_case(tmp_path, 5, n_nodes=6, iterations=30, gzip_some=True)
    files = node_files(tmp_path / "failed")
    assert any(p.name.endswith(".gz") for p in files.values())
    assert_truthful(tmp_path, truth)
    for p in files.values():
        assert read_lines(p)


def test_oddities_keep_truth_valid(tmp_path):
    truth = simulate_case(tmp_path, 8, n_nodes=6, iterations=40, oddities=True, gzip_some=False)
    assert_truthful(tmp_path, truth)
    raw = b"".join(p.read_bytes() for p in node_files(tmp_path / "failed").values())
    assert b"\r\n" in raw and b"\xff" in raw
    assert max(len(x) for x in raw.split(b"\n")) > 200_000
    ends = [p.read_bytes()[-1:] for p in node_files(tmp_path / "failed").values()]
    assert b"\n" in ends and any(e != b"\n" for e in ends)


def test_big_files_mode(tmp_path):
    target = 1_500_000
    truth = simulate_case(tmp_path, 4, framework="torchtitan", fault="cuda_oom", n_nodes=2,
                          bytes_per_node=target, n_baselines=0, gzip_some=False)
    sizes = [p.stat().st_size for p in node_files(tmp_path / "failed").values()]
    assert all(0.5 * target < s < 2.0 * target for s in sizes), sizes
    assert_truthful(tmp_path, truth)


def test_suite_varies(tmp_path):
    truths = simulate_suite(tmp_path, [0, 1, 2], n_nodes=3, iterations=30, n_baselines=1, workers=1)
    assert [t["seed"] for t in truths] == [0, 1, 2]
    assert len({t["fault"]["id"] for t in truths}) == 3
    for s in (0, 1, 2):
        assert (tmp_path / f"case-{s}" / "truth.json").exists()


@pytest.mark.parametrize("kwargs,message", [
    ({"fault": "no_such_fault"}, "unknown fault"),
    ({"framework": "tensorflow"}, "unknown framework"),
    ({"fault": "npu_oom", "framework": "megatron"}, "does not occur"),
    ({"n_nodes": 1}, "at least 2"),
])
def test_bad_input(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        simulate_case(tmp_path, 1, **kwargs)
    assert not (tmp_path / "truth.json").exists()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n_nodes=st.integers(2, 5), rpn=st.sampled_from([1, 2, 4, 8]))
def test_truth_invariants_over_seeds(tmp_path_factory, seed, n_nodes, rpn):
    out = tmp_path_factory.mktemp("h")
    truth = simulate_case(out, seed, n_nodes=n_nodes, ranks_per_node=rpn, iterations=30, n_baselines=1)
    nodes = node_files(out / "failed")
    assert len(nodes) == n_nodes == truth["n_nodes"]
    assert truth["faulty_nodes"] and set(truth["faulty_nodes"]) <= set(nodes)
    assert truth["stage"] in D.STAGES
    assert truth["fault"]["category"] in D.CATEGORIES
    if truth["iteration"] is not None:
        assert truth["stage"] == "training" and truth["iteration"] > 0
    assert_truthful(out, truth)
    lines = baseline_lines(out, truth)
    assert lines and not [ln for ln in lines for m in D.FAULT_MARKERS if m in ln]
