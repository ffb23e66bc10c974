"""l4 on real torchrun runs: culprit, stage and iteration against truth it did not write.

Why: every other accuracy test scores l4 on its own simulator.  These fixtures are real
``torchrun`` jobs (gloo, several "nodes" of 2-4 ranks, one fault injected through a real
mechanism; see ``benchmarks/realruns/``), taken from the development set and checked in
compressed, so CI never launches torchrun.  Assertions that today's engine gets wrong are
marked ``xfail(strict=True)``: each turns into a failure the day the engine is fixed, so
the mark must then be removed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from l4.engine import diagnose
from tests.realrun_cases import FIXTURES, fixture_names, truth_of, unpack

NAMES = fixture_names()

# (case, aspect) -> what the engine does instead today (measured on the current engine)
KNOWN_MISSES: dict[tuple[str, str], str] = {
}


def _params():
    out = []
    for name in NAMES:
        # iteration only where the fault struck inside the training loop (as the scorer)
        aspects = ("node", "stage", "iteration") if truth_of(name)["iteration"] is not None else ("node", "stage")
        for aspect in aspects:
            reason = KNOWN_MISSES.get((name, aspect))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(name, aspect, marks=marks, id=f"{name}-{aspect}"))
    return out


_REPORTS: dict[str, tuple[dict, dict]] = {}


def _diagnosed(name: str, root: Path) -> tuple[dict, dict]:
    """(report, truth) of one fixture, diagnosed once per test session."""
    if name not in _REPORTS:
        case, truth = unpack(name, root)
        report = diagnose(case / "failed", baselines=[case / b for b in truth["baselines"]], store_path=False)
        _REPORTS[name] = (report, truth)
    return _REPORTS[name]


def test_fixtures_are_small_varied_development_runs() -> None:
    assert 4 <= len(NAMES) <= 28  # a few: they are for behaviour, the benchmark is for figures
    assert sum(p.stat().st_size for p in FIXTURES.iterdir()) <= 2_000_000


def test_each_fixture_is_a_complete_case(tmp_path: Path) -> None:
    stages, prefixes = set(), set()
    for name in NAMES:
        case, truth = unpack(name, tmp_path)
        assert truth["seed"] < 9000, "fixtures come from the development set only"
        for d in ["failed", *truth["baselines"]]:
            assert (case / d / "job.json").is_file() and list((case / d / "logs").glob("*.log"))
        assert truth["faulty_nodes"] and all((case / "failed" / "logs" / f"{n}.log").is_file()
                                             for n in truth["faulty_nodes"])
        stages.add(truth["stage"])
        prefixes.add(truth["style"]["prefix"])
    assert len(stages) >= 3 and len(prefixes) >= 2


@pytest.mark.parametrize(("name", "aspect"), _params())
def test_l4_on_a_real_run(name: str, aspect: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    report, truth = _diagnosed(name, tmp_path_factory.mktemp(name))
    if aspect == "node":
        assert report["nodes"][0]["node"] in truth["faulty_nodes"]
    elif aspect == "stage":
        assert report["stage"] == truth["stage"]
    else:
        top3 = [it["iteration"] for it in report["iterations"][:3]]
        assert truth["iteration"] in top3
