"""The real-run benchmark's harness, truth rules and scorer, without launching torchrun.

Why: the benchmark is only worth something if its plan covers what it claims (>= 10 fault
kinds, all seven stages, two disjoint sets), if its truth rules find the culprit's own
lines and never call a victim's line an indicator, and if ``accuracy.py --cases`` scores
pre-generated cases with the same rules -- and refuses half-copied ones in one line."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.realrun_cases import fixture_names, unpack

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks" / "realruns"))
import make_runs  # noqa: E402
import truth as rtruth  # noqa: E402

STAGES = {"initialization", "data_loading", "model_loading", "training", "checkpointing",
          "evaluation", "finalization"}


def _accuracy():
    spec = importlib.util.spec_from_file_location("accuracy_bench", REPO / "benchmarks" / "accuracy.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("set_name", ["dev", "heldout"])
def test_each_set_covers_ten_kinds_and_all_seven_stages(set_name: str) -> None:
    base = make_runs.SETS[set_name]
    plans = [make_runs.plan_case(set_name, s) for s in range(base, base + 24)]
    kinds = {inj.kind for _, inj in plans}
    assert len(kinds) >= 10
    assert {make_runs.FAULTS[k][0] for k in kinds} == STAGES
    for cfg, inj in plans:
        assert 2 <= cfg.rpn <= 4 and 0 <= inj.node < cfg.n_nodes and 0 <= inj.local_rank < cfg.rpn
        # an iteration exactly when the fault strikes inside the training loop
        assert (inj.at_iter is not None) == (make_runs.FAULTS[inj.kind][0] == "training")
        if inj.at_iter is not None:
            assert 1 <= inj.at_iter <= cfg.iters


def test_dev_and_heldout_share_no_host_names_and_no_configuration() -> None:
    dev = [make_runs.plan_case("dev", s)[0] for s in range(24)]
    held = [make_runs.plan_case("heldout", s)[0] for s in range(9000, 9024)]
    assert not {h for c in dev for h in c.hosts} & {h for c in held for h in c.hosts}
    assert not {c.config_id for c in dev} & {c.config_id for c in held}
    # the same seed always plans the same case (a single case can be regenerated)
    assert make_runs.plan_case("dev", 7) == make_runs.plan_case("dev", 7)


@pytest.mark.parametrize(("case", "says"), [("9001", "not in the dev set"), ("case-x", "expected case-<seed>")])
def test_a_bad_case_name_is_refused_in_one_line(case: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        make_runs.main(["--set", "dev", "--out", "/nonexistent/x", "--case", case])
    assert says in capsys.readouterr().err


# lines printed by real runs (torch 2.13, gloo, torchrun), as they appeared in the logs
CULPRIT_TB = [
    "Traceback (most recent call last):",
    '  File "/tmp/l4rr/j/node004/code/train.py", line 36, in <module>',
    "    import rrhelpers",
    "    ^^^^^^^^^^^^^^^^",
    "ModuleNotFoundError: No module named 'rrhelpers'",
]
VICTIM_TB = [
    "Traceback (most recent call last):",
    '  File "/tmp/l4rr/j/node003/code/train.py", line 196, in main',
    "    dist.init_process_group(backend=\"gloo\", timeout=datetime.timedelta(seconds=args.timeout))",
    "torch.distributed.DistStoreError: wait timeout after 20000ms, keys: /default_pg/0//cpu//0/2",
]
LAUNCHER = [
    "E1201 08:16:54.156000 14719 torch/distributed/elastic/multiprocessing/api.py:1002] failed "
    "(exitcode: 1) local_rank: 0 (pid: 14813) of binary: /work/main/.venv/bin/python",
]


def test_the_culprits_exception_is_the_indicator_and_its_frames_are_context() -> None:
    lines = ["[default0]:" + x for x in CULPRIT_TB] + LAUNCHER
    got = {no: (role, kind) for no, role, kind in
           rtruth.classify_file(lines, culprit=True, kind="missing_module")}
    assert got[5] == ("indicators", "missing_module")
    assert all(got[i] == ("indicators", "missing_module:context") for i in (1, 2, 3))
    assert got[6] == ("symptoms", "launcher_teardown")


def test_newer_kinds_start_at_their_own_seeds_and_older_seeds_keep_their_faults() -> None:
    """Adding fault kinds must not re-plan a case already run: seeds below NEW_KINDS_FROM keep
    their kind, node and iteration; from there on every newer kind is planned, each where
    its mechanism makes one node the culprit."""
    assert make_runs.plan_case("dev", 728)[1] == make_runs.Injection("straggler", 2, 1, 14)
    assert make_runs.plan_case("dev", 849)[1].kind == "sigsegv"
    assert make_runs.plan_case("heldout", 9319)[1].kind == "sigstop"
    assert len(make_runs.ORDER["dev"]) == len(make_runs.ORDER["heldout"]) == 16
    for set_name, start in make_runs.NEW_KINDS_FROM.items():
        plans = [make_runs.plan_case(set_name, s) for s in range(start, start + 80)]
        kinds = {inj.kind for _, inj in plans}
        assert set(make_runs.NEW_KINDS) <= kinds
        assert set(make_runs.ORDER[set_name]) <= kinds
        for cfg, inj in plans:
            if inj.kind == "port_in_use":  # the store's node, which only static rendezvous pins
                assert inj.node == 0 and cfg.rdzv == "static"
            if inj.kind == "wrong_master":  # node 0 hosts the store whatever it is told
                assert inj.node > 0


BAD_SAMPLE_TB = [
    "[rank3]: Traceback (most recent call last):",
    '[rank3]:   File "/tmp/l4rr/job/gpu-a18/code/train.py", line 344, in main',
    "[rank3]:     w = BUCKET_WEIGHTS[bucket]",
    "[rank3]:         ~~~~~~~~~~~~~~^^^^^^^^",
    "[rank3]: IndexError: index 8 is out of bounds for dimension 0 with size 4",
]
MISMATCH_TB = [
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/tmp/l4rr/job/cn211/code/train.py", line 282, in main',
    '[rank1]:     model.load_state_dict(state["model"])',
    "[rank1]: RuntimeError: Error(s) in loading state_dict for Sequential:",
    "[rank1]: \tsize mismatch for 0.weight: copying a param with shape torch.Size([48, 32]) from "
    "checkpoint, the shape in current model is torch.Size([64, 32]).",
]


@pytest.mark.parametrize(("kind", "tb", "key"), [("bad_sample", BAD_SAMPLE_TB, [3, 5]),
                                                 ("weights_mismatch", MISMATCH_TB, [3, 4, 5])])
def test_newer_kinds_name_the_failing_call_and_the_exception(kind: str, tb: list[str], key: list[int]) -> None:
    got = {no: (role, k) for no, role, k in rtruth.classify_file(tb, culprit=True, kind=kind)}
    assert [no for no, (role, k) in got.items() if role == "indicators" and k == kind] == key
    assert got[1] == ("indicators", f"{kind}:context")
    # the same lines on a victim's node are no indicator
    assert not [r for _, r, _ in rtruth.classify_file(tb, culprit=False, kind=kind) if r == "indicators"]


def test_a_name_that_does_not_resolve_is_the_wrong_masters_indicator() -> None:
    line = ("[W1205 04:06:22.118648623 socket.cpp:764] [c10d] The IPv6 network addresses of "
            "(trn-70-, 38495) cannot be retrieved (gai error: -2 - Name or service not known).")
    assert rtruth.classify_file([line], culprit=True, kind="wrong_master") == [(1, "indicators", "wrong_master")]
    port = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
            "network address. port: 29612, useIpv6: false, code: -98, name: EADDRINUSE, message: "
            "address already in use")
    assert rtruth.classify_file([port], culprit=True, kind="port_in_use") == [(1, "indicators", "port_in_use")]


def test_a_victims_file_has_no_indicator() -> None:
    lines = ["[default1]:" + x for x in VICTIM_TB] + LAUNCHER
    got = rtruth.classify_file(lines, culprit=False, kind="missing_module")
    assert got and all(role == "symptoms" for _, role, _ in got)
    assert (4, "symptoms", "peer_error") in got


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=len(CULPRIT_TB) + len(VICTIM_TB),
                max_size=len(CULPRIT_TB) + len(VICTIM_TB)),
       st.sampled_from(["[default{}]:", "[default{0}]:[rank{0}]: "]))
def test_interleaved_ranks_keep_their_own_tracebacks(picks: list[bool], fmt: str) -> None:
    """Two ranks of one node print at once: the faulty rank's exception stays the only
    indicator and the other rank's timeout stays a symptom, however the lines interleave."""
    a, b = list(CULPRIT_TB), list(VICTIM_TB)
    lines, origin = [], []
    for pick in picks:
        src = a if (pick and a) or not b else b
        origin.append("a" if src is a else "b")
        lines.append((fmt.format(0) if src is a else fmt.format(1)) + src.pop(0))
    got = {no: (role, kind) for no, role, kind in rtruth.classify_file(lines, culprit=True, kind="missing_module")}
    key = [no for no, (role, kind) in got.items() if role == "indicators" and not kind.endswith(":context")]
    assert len(key) == 1 and lines[key[0] - 1].endswith("No module named 'rrhelpers'")
    for no, (role, _) in got.items():
        if origin[no - 1] == "b":
            assert role == "symptoms"


def test_load_cases_refuses_an_empty_or_incomplete_directory(tmp_path: Path) -> None:
    acc = _accuracy()
    with pytest.raises(ValueError, match="no case directories"):
        acc.load_cases(tmp_path)
    case = tmp_path / "case-3"
    (case / "failed").mkdir(parents=True)
    (case / "truth.json").write_text(json.dumps({"baselines": ["baseline-0"]}))
    with pytest.raises(ValueError, match="missing baseline-0"):
        acc.load_cases(tmp_path)
    (case / "truth.json").write_text("{not json")
    with pytest.raises(ValueError, match="unreadable truth"):
        acc.load_cases(tmp_path)


def test_accuracy_cases_option_says_what_is_wrong_in_one_line(tmp_path: Path, capsys) -> None:
    acc = _accuracy()
    assert acc.main(["--cases", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --cases:") and "\n" not in err


@pytest.mark.skipif(not fixture_names(), reason="no real-run fixtures checked in")
def test_accuracy_scores_real_run_fixtures_with_the_same_table(tmp_path: Path, capsys) -> None:
    names = fixture_names()[:2]
    truths = [unpack(n, tmp_path)[1] for n in names]
    acc = _accuracy()
    assert acc.main(["--cases", str(tmp_path), "--json", "--per-case"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n_jobs"] == len(names)
    assert set(res["metrics"]) == {"l4", "Error_time", "Error_count", "error-level-lines"}
    got = {r["case"]: r for r in res["per_case"]}
    for n, t in zip(names, truths, strict=True):
        assert got[n]["truth_nodes"] == t["faulty_nodes"] and got[n]["truth_stage"] == t["stage"]
        # every indicator and symptom location points at a real line of the failed job
        for item in t["indicators"] + t["symptoms"]:
            lines = (tmp_path / n / "failed" / item["file"]).read_text().split("\n")
            assert 1 <= item["line"] <= len(lines) and lines[item["line"] - 1].strip()


def test_the_generic_profile_ranks_markers_and_knows_its_resume_lines() -> None:
    """Plain torchrun jobs get the generic profile: its resume rules once landed in
    ``own_markers`` (a positional slip) and every marker ranking then raised TypeError."""
    from l4.profiles import load_profiles

    generic = load_profiles()["generic"]
    assert generic.own_markers == 0 and generic.resume
    assert generic.marker_rank("iter <*>/<*> loss=<*>") in (0, 1)


def test_override_forces_a_format_on_development_runs_only(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(make_runs, "OVERRIDES", {})
    make_runs.main(["--set", "dev", "--list", "--case", "7", "--override", "log_format=bracket",
                    "--override", "rpn=2", "--override", "faulthandler=false"])
    line = capsys.readouterr().out
    cfg, _ = make_runs.plan_case("dev", 7)
    assert (cfg.log_format, cfg.rpn, cfg.faulthandler) == ("bracket", 2, False)
    # its own configuration id: overridden runs never reuse the plan's baselines
    assert "o-" in cfg.config_id and cfg.config_id in line
    monkeypatch.setattr(make_runs, "OVERRIDES", {})
    for bad in (["--set", "heldout", "--override", "rpn=2"], ["--set", "dev", "--override", "hosts=x"],
                ["--set", "dev", "--override", "nosuchfield=1"]):
        with pytest.raises(SystemExit):
            make_runs.main([*bad, "--list"])
        assert "--override" in capsys.readouterr().err
