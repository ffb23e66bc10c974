"""A culprit singled out by what it did in the training loop, not by a line of its own,
is more likely hardware than its victims' timeouts read (l4.culprit_prior)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from l4.culprit_prior import (
    ECHO_WEIGHT,
    SILENT_EVAL_USER_ODDS,
    SILENT_HARDWARE_ODDS,
    apply_prior,
    silent_culprit,
)
from l4.pipeline import attach_root_causes

CATS = [{"category": "platform", "confidence": 0.5}, {"category": "hardware", "confidence": 0.25},
        {"category": "framework", "confidence": 0.15}, {"category": "user", "confidence": 0.1}]
TIMEOUT = ("[E ProcessGroupNCCL.cpp:1595] [Rank 3] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=4412, OpType=ALLREDUCE, NumelIn=1, Timeout(ms)=600000) ran for 600027 milliseconds")


def _report(stage: str, **evidence: float) -> dict:
    return {"job_id": "j", "stage": stage, "nodes": [{"node": "gpu-3", "score": 0.4, "evidence": evidence}],
            "iterations": [], "root_causes": []}


def test_a_quiet_node_that_stopped_first_in_training_is_silent():
    assert silent_culprit(_report("training", specific=0.05, stopped_first=1.0, iforest=1.0))
    assert silent_culprit(_report("training", named=1.0))


def test_a_culprit_with_its_own_error_or_outside_the_loop_is_not():
    assert not silent_culprit(_report("training", specific=0.9, stopped_first=1.0))
    assert not silent_culprit(_report("initialization", specific=0.0, stopped_first=1.0))
    # the forest alone singled it out: nothing it did says it was the one that went quiet
    assert not silent_culprit(_report("training", specific=0.1, iforest=1.0))
    assert not silent_culprit({"stage": "training", "nodes": []})
    assert not silent_culprit({"stage": "training", "nodes": [{"evidence": {"specific": "x"}}]})


def test_the_prior_moves_hardware_up_by_its_odds_and_renormalises():
    out = apply_prior(CATS, _report("training", specific=0.0, missing_symptom=0.3))
    conf = {c["category"]: c["confidence"] for c in out}
    assert out[0]["category"] == "hardware"
    assert abs(conf["hardware"] / conf["platform"] - SILENT_HARDWARE_ODDS * (0.25 / 0.5) ** ECHO_WEIGHT) < 0.01
    assert abs(sum(conf.values()) - 1.0) < 1e-3
    assert apply_prior(CATS, _report("training", specific=0.8, stopped_first=1.0)) == CATS


def test_a_quiet_node_in_evaluation_points_to_the_evaluation_code():
    """The same nodes ran the training collectives without trouble; a node that leaves the
    others waiting in evaluation is most often evaluation code or data (uneven batches)."""
    report = _report("evaluation", specific=0.05, stopped_first=1.0)
    assert silent_culprit(report)
    out = apply_prior(CATS, report)
    conf = {c["category"]: c["confidence"] for c in out}
    assert abs(conf["user"] / conf["platform"] - SILENT_EVAL_USER_ODDS * (0.1 / 0.5) ** ECHO_WEIGHT) < 0.01
    assert abs(conf["hardware"] / conf["platform"] - (0.25 / 0.5) ** ECHO_WEIGHT) < 0.01  # no hardware odds
    assert apply_prior(CATS, _report("evaluation", specific=0.9, stopped_first=1.0)) == CATS


def test_loud_echoes_do_not_outvote_what_the_silent_culprit_did():
    """A silent culprit's report holds only its victims' lines, and those read confidently
    like the network or the scheduler (collective timeouts, a step cancelled).  They are
    echoes, weak evidence of the owner: flattened (ECHO_WEIGHT), the node that went quiet
    in the training loop still points to hardware."""
    loud = [{"category": "platform", "confidence": 0.85}, {"category": "user", "confidence": 0.08},
            {"category": "hardware", "confidence": 0.05}, {"category": "framework", "confidence": 0.02}]
    quiet = _report("training", specific=0.06, missing_symptom=0.86, stopped_first=1.0)
    assert apply_prior(loud, quiet)[0]["category"] == "hardware"
    assert apply_prior(loud, _report("training", specific=0.9, stopped_first=1.0)) == loud
    evaluation = apply_prior(loud, _report("evaluation", specific=0.06, stopped_first=1.0))
    assert evaluation[0]["category"] == "user"


@given(st.lists(st.floats(0.001, 1.0), min_size=4, max_size=4), st.sampled_from(
    ["training", "evaluation", "initialization"]), st.floats(0, 1), st.floats(0, 1))
def test_the_prior_keeps_four_categories_summing_to_one(ps, stage, spec, stop):
    total = sum(ps)
    cats = sorted(({"category": k, "confidence": p / total}
                   for k, p in zip(["hardware", "user", "platform", "framework"], ps, strict=True)),
                  key=lambda c: -c["confidence"])
    out = apply_prior(cats, _report(stage, specific=spec, stopped_first=stop))
    assert sorted(c["category"] for c in out) == ["framework", "hardware", "platform", "user"]
    assert abs(sum(c["confidence"] for c in out) - 1.0) < 1e-3
    assert [c["confidence"] for c in out] == sorted((c["confidence"] for c in out), reverse=True)


def test_a_silent_hang_reads_as_hardware_in_a_diagnosis(kb: Path):
    events = [{"event_id": 1, "template": TIMEOUT, "symptom": True,
               "examples": [{"node": "gpu-1", "text": TIMEOUT}]}]
    quiet = attach_root_causes(_report("training", specific=0.0, stopped_first=1.0,
                                       missing_symptom=0.5) | {"events": events}, kb=kb)
    loud = attach_root_causes(_report("training", specific=1.0) | {"events": events}, kb=kb)
    before = {c["category"]: c["confidence"] for c in loud["categories"]}
    after = {c["category"]: c["confidence"] for c in quiet["categories"]}
    assert loud["categories"][0]["category"] != "hardware"  # what the timeouts read like
    # the same lines, flattened as echoes, and the hardware odds of a node that went quiet
    ratio = before["hardware"] / before["platform"]
    want = SILENT_HARDWARE_ODDS * ratio ** ECHO_WEIGHT
    assert abs(after["hardware"] / after["platform"] - want) < 0.05 * want, (before, after)
