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
from l4.sim import dialect as V
from l4.sim import simdata as D
from l4.sim.simulate import list_faults, list_frameworks, simulate_case, simulate_suite

NATIVE_ITER = {
    "megatron": r" iteration\s+(\d+)/", "mindspeed": r" iteration\s+(\d+)/",
    "torchtitan": r"step:\s+(\d+)\s", "deepspeed": r"\] step=(\d+),",
    "hf": r"(?m)(?:^|[\]:Z] ?)\s*\d{1,3}%\|.{10}\| (\d+)/\d+ \[[\d:]+<[\d:]+, [\d.]+s/it\]$",
}


def has_marker(line: str, marker: str) -> bool:
    """Does ``line`` carry a fault marker?  A numeric one ("507018", an Ascend error code)
    must stand on its own: the same digits inside a timestamp's nanoseconds, or as its
    whole fraction ("14:00:38.507053"), are no fault."""
    if marker.isdigit():
        return re.search(rf"(?<![\d.]){marker}(?!\d)", line) is not None
    return marker in line


def printed_iterations(job: Path, truth: dict) -> list[int]:
    """Iteration numbers the job printed, read the way its dialect words them."""
    style = truth["style"]["iter_line"]
    pattern = NATIVE_ITER[truth["framework"]] if style == "native" else V.progress_pattern(style)
    if truth["framework"] == "hf" and style != "epoch_bar":  # Trainer's bar, whatever the script's lines
        pattern = NATIVE_ITER["hf"]
    out = []
    for p in node_files(job).values():
        found = re.findall(pattern, "\n".join(read_lines(p)))
        if style == "epoch_bar":  # (epoch, step in it, steps per epoch): the global step
            out += [int(e) * int(n) + int(k) for e, k, n in found]
        else:
            out += [int(x) for x in found]
    return out


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
    hits = [ln for ln in lines for m in D.FAULT_MARKERS if has_marker(ln, m)]
    assert not hits, hits[:3]


def test_baselines_finish_the_run(small_case):
    out, truth = small_case
    text = "\n".join(baseline_lines(out, truth))
    assert "[after training is done]" in text  # Megatron's finalization marker
    saved = "  successfully saved checkpoint from iteration {it:7d} to {ckpt_dir} [ t 1/{tp}, p 1/{pp} ]"
    k = truth["style"]["dialect"]["paraphrase"].get(saved)
    wording = V.PARAPHRASES[saved][k - 1] if k else saved
    assert wording.split("{")[0].strip() in text


def test_training_fault_iteration_is_first_unfinished(small_case):
    """Megatron prints iteration N at its end; a fault during N+1 means N+1 never prints."""
    out, truth = small_case
    assert truth["stage"] == "training" and isinstance(truth["iteration"], int)
    printed = printed_iterations(out / "failed", truth)
    assert printed and max(printed) == truth["iteration"] - 1


@pytest.mark.parametrize("framework", ["torchtitan", "deepspeed", "hf"])
@pytest.mark.parametrize("vary", [False, True])
def test_iteration_semantics_other_frameworks(tmp_path, framework, vary):
    fault = "segfault" if framework != "deepspeed" else "cuda_oom"
    for seed in range(6):
        truth = simulate_case(tmp_path / str(seed), seed, framework=framework, fault=fault, n_nodes=3,
                              iterations=40, n_baselines=0, vary=vary)
        if truth["stage"] != "training":
            continue
        printed = printed_iterations(tmp_path / str(seed) / "failed", truth)
        assert printed and max(printed) == truth["iteration"] - 1
        return
    pytest.skip("no training-stage case among the seeds tried")


@pytest.mark.parametrize("iter_style", V.ITER_STYLES)
@pytest.mark.parametrize("framework", ["megatron", "deepspeed", "torchtitan"])
def test_every_progress_wording_keeps_the_iteration_exact(tmp_path, iter_style, framework):
    """Whatever the wording, the last printed iteration is the one before the truth's."""
    d = V.Dialect(ts="epoch_ts", level="glog", iter_style=iter_style, progress_who="last")
    for seed in range(8):
        truth = simulate_case(tmp_path / str(seed), seed, framework=framework, fault="segfault" if framework != "deepspeed" else "cuda_oom",
                              n_nodes=3, iterations=40, n_baselines=0, dialect=d)
        if truth["stage"] != "training":
            continue
        assert truth["style"]["iter_line"] == iter_style
        printed = printed_iterations(tmp_path / str(seed) / "failed", truth)
        assert printed and max(printed) == truth["iteration"] - 1
        assert_truthful(tmp_path / str(seed), truth)
        return
    pytest.skip("no training-stage case among the seeds tried")


@pytest.mark.parametrize("framework", ["megatron", "hf"])
def test_an_epoch_bar_counts_global_steps_and_l4_reads_them(tmp_path, framework):
    """A tqdm bar per epoch whose count starts over: the truth stays the global step,
    the bar's counts add up to it, and the engine finds it from the bar alone."""
    from l4 import engine

    d = V.Dialect(ts="epoch_ts", level="glog", iter_style="step", progress_who="last",
                  bar_epoch=12)
    for seed in range(6, 40):
        case = tmp_path / str(seed)
        truth = simulate_case(case, seed, framework=framework, fault="segfault", n_nodes=3,
                              iterations=60, n_baselines=1, dialect=d)
        if truth["stage"] != "training" or truth["style"]["iter_line"] != "epoch_bar":
            continue
        printed = printed_iterations(case / "failed", truth)
        assert printed and max(printed) == truth["iteration"] - 1 and max(printed) > 12
        bars = [ln for p in node_files(case / "failed").values() for ln in read_lines(p)
                if re.search(V.EPOCH_BAR, ln)]
        assert any(" 1/12 [" in ln for ln in bars[1:])  # it starts over
        assert_truthful(case, truth)
        rep = engine.diagnose(case / "failed", baselines=sorted(case.glob("baseline-*")),
                              store_path=False)
        assert abs(rep["iterations"][0]["iteration"] - truth["iteration"]) <= 1, rep["iterations"][:3]
        return
    pytest.skip("no fresh training-stage case among the seeds tried")


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
    hits = [ln for ln in baseline_lines(tmp_path, truth) for m in D.FAULT_MARKERS if has_marker(ln, m)]
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
              "hf": "s/it]", "torchtitan": "Building 1-D device mesh"}[framework]
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
    assert lines and not [ln for ln in lines for m in D.FAULT_MARKERS if has_marker(ln, m)]


# ---- dialects ------------------------------------------------------------------------------

def _template_regex(tmpl: str) -> re.Pattern:
    """The whole rendered template, any prefix before it: literal text must be verbatim."""
    parts = re.split(r"(\{[^{}]*\})", tmpl.replace("{{", "\0").replace("}}", "\1"))
    rx = "".join(".*?" if p.startswith("{") else re.escape(p.replace("\0", "{").replace("\1", "}"))
                 for p in parts)
    return re.compile(rx + "$")


KIND_REGEXES = {k: [_template_regex(t) for t in ts] for k, ts in KIND_TEMPLATES.items()}


def assert_verbatim(case: Path, truth: dict) -> None:
    """Every key truth line is its block's template, unchanged by the dialect, at its line."""
    cache: dict[str, list[str]] = {}
    for role in ("indicators", "symptoms"):
        for item in truth[role]:
            if item["kind"].endswith(":context"):
                continue
            lines = cache.get(item["file"])
            if lines is None:
                lines = cache[item["file"]] = read_lines(case / "failed" / item["file"])
            text = lines[item["line"] - 1]
            assert any(rx.search(text) for rx in KIND_REGEXES[item["kind"]]), (item, text)


dialects = st.builds(
    V.Dialect,
    ts=st.sampled_from(V.TS_FORMATS + ("native",)), level=st.sampled_from(V.LEVEL_FORMATS + ("native",)),
    logger=st.sampled_from(("__main__", "train")), wrap_plain=st.booleans(),
    iter_style=st.sampled_from(V.ITER_STYLES + ("native",)),
    progress_who=st.sampled_from(("native", "r0", "last", "l0", "all")),
    banner_who=st.sampled_from(("native", "l0", "all")),
    outer=st.sampled_from(("none", "label", "pdsh", "kubectl")),
    host_scheme=st.sampled_from(V.HOST_SCHEMES + ("native",)),
    paraphrase=st.dictionaries(st.sampled_from(sorted(V.PARAPHRASES)), st.integers(1, 2), max_size=8),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 8999), dialect=st.one_of(st.none(), dialects),
       framework=st.sampled_from(list_frameworks()))
def test_truth_lines_verbatim_in_any_dialect(tmp_path_factory, seed, dialect, framework):
    """Random seeds and dialects: truth lines exist verbatim at their recorded line."""
    if dialect is not None:
        dialect.paraphrase = {k: min(v, len(V.PARAPHRASES[k])) for k, v in dialect.paraphrase.items()}
    out = tmp_path_factory.mktemp("d")
    fault = next(f for f in list_faults()[seed % 7:] + list_faults() if framework in D.FAULTS[f].frameworks)
    truth = simulate_case(out, seed, framework=framework, fault=fault, n_nodes=3, iterations=24,
                          n_baselines=1, dialect=dialect)
    assert_truthful(out, truth)
    assert_verbatim(out, truth)
    if truth["iteration"] is not None:
        printed = printed_iterations(out / "failed", truth)
        assert not printed or max(printed) == truth["iteration"] - 1
    lines = baseline_lines(out, truth)
    assert lines and not [ln for ln in lines for m in D.FAULT_MARKERS if has_marker(ln, m)]
    rec = truth["style"]["dialect"]
    assert rec == (dialect or V.Dialect()).record() or dialect is None


def _first_progress_shape(job: Path) -> str:
    """The first training-loop line of the job with digits masked (its dialect's shape)."""
    for p in sorted(node_files(job).values()):
        for ln in read_lines(p):
            if re.search(r"(iteration|step|it=|Batch|loss)\b", ln) and re.search(r"\d", ln):
                return re.sub(r"\d+", "0", ln)[:60]
    return ""


@pytest.mark.parametrize("vary", [True, False])
def test_jobs_of_one_framework_speak_many_dialects(tmp_path, vary):
    """With dialects a framework's jobs differ in wording and format; without, they do not."""
    records, shapes, prefixes, hosts = set(), set(), set(), set()
    for seed in range(10):
        case = tmp_path / str(seed)
        truth = simulate_case(case, seed, framework="megatron", fault="segfault", n_nodes=2,
                              ranks_per_node=2, iterations=20, n_baselines=0, vary=vary)
        d = truth["style"]["dialect"]
        records.add((d["ts"], d["level"], d["iter_style"], d["progress_who"]))
        shapes.add(_first_progress_shape(case / "failed"))
        prefixes.add((d["inner"], d["outer"]))
        hosts.add(truth["style"]["host_scheme"])
    if vary:
        assert len(records) >= 6 and len(shapes) >= 4 and len(prefixes) >= 3 and len(hosts) >= 3
    else:
        assert records == {("native", "native", "native", "native")}
        assert len(prefixes) == 1


def test_dialect_decides_who_prints(tmp_path):
    """progress_who: all ranks of every node, or only the first rank of the job."""
    counts = {}
    for who in ("all", "r0"):
        d = V.Dialect(ts="py_ts", level="bracket", iter_style="it_eq", progress_who=who, inner="rank")
        case = tmp_path / who
        simulate_case(case, 5, framework="torchtitan", fault="segfault", n_nodes=3, ranks_per_node=2,
                      iterations=20, n_baselines=0, dialect=d)
        per_rank: dict[str, int] = {}
        for p in node_files(case / "failed").values():
            for ln in read_lines(p):
                m = re.search(r"\[rank(\d+)\]:\S+ \S+ \[INFO\] it=\d+ loss=", ln)
                if m:
                    per_rank[m.group(1)] = per_rank.get(m.group(1), 0) + 1
        counts[who] = per_rank
    assert set(counts["all"]) == {str(r) for r in range(6)}
    assert set(counts["r0"]) == {"0"}


def test_dialect_headers_and_prefixes_render(tmp_path):
    d = V.Dialect(ts="us_ts", level="dash", logger="train", wrap_plain=True, outer="label", inner="default",
                  banner_who="l0", paraphrase={"training ...": 2})
    truth = simulate_case(tmp_path, 3, framework="megatron", fault="segfault", n_nodes=2, ranks_per_node=2,
                          iterations=20, n_baselines=0, dialect=d)
    text = "\n".join(ln for p in node_files(tmp_path / "failed").values() for ln in read_lines(p))
    # Slurm --label of the node's task, then torchrun's local-rank prefix, then the script's header
    assert re.search(r"(?m)^1: \[default0\]:\d\d/\d\d/\d{4} \d\d:\d\d:\d\d - train - INFO - >>> start training$", text)
    assert re.search(r"(?m)^0: \[default0\]:.* - train - INFO - >>> start training$", text)  # l0 prints banners
    assert "INFO - training ..." not in text
    assert truth["style"]["dialect"]["outer"] == "label"
