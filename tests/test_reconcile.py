"""Which job events lack a flow run (flows.reconcile): the pure matching, over plain data.

The end-to-end case (an event the server took before any ``l4 serve`` existed is
diagnosed once one starts) is in test_delivery_prefect.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from flows.reconcile import EXECUTED, FAILED_ACTION, JobEvent, missing, outcomes, render, run_key
from flows.serve import DIAGNOSE_PARAMETERS, LEARN_PARAMETERS

FAILED, SUCCEEDED = "l4.training.job.failed", "l4.training.job.succeeded"
SPECS = {FAILED: ("diag", DIAGNOSE_PARAMETERS), SUCCEEDED: ("learn", LEARN_PARAMETERS)}
T0 = datetime(2026, 12, 1, tzinfo=UTC)


LATER = T0 + timedelta(hours=1)  # every event below was received before this


def _event(i: int, name: str = FAILED, **payload) -> JobEvent:
    at = T0 + timedelta(seconds=i)
    return JobEvent(f"e{i}", name, at, payload, at)


def _action(name: str, event_id: str) -> JobEvent:
    return JobEvent(f"a-{event_id}-{name}", name, LATER, {}, LATER,
                    (("prefect.automation.x", "automation"),
                     (f"prefect.event.{event_id}", "triggering-event")))


def test_render_takes_what_the_triggers_templates_take():
    payload = {"job_dir": "/jobs/a", "job_id": "a", "failure_key": "dir:/jobs/a@1"}
    assert render(DIAGNOSE_PARAMETERS, payload) == {
        "job": "/jobs/a", "job_id": "a", "config_id": None, "baselines": [],
        "failure_key": "dir:/jobs/a@1"}
    assert render(LEARN_PARAMETERS, {"job_dir": "/jobs/b", "config_id": "c"}) == {
        "job": "/jobs/b", "job_id": None, "config_id": "c"}
    # a template this module cannot render: leave the event to Prefect
    assert render({"job": "{{ event.payload.job_dir | upper }}"}, payload) is None


def test_run_key_is_the_failure_key_else_the_job():
    assert run_key({"failure_key": "job:7@t", "job": "/j"}) == "job:7@t"
    assert run_key({"failure_key": None, "job": "/j", "job_id": "7"}) == "job:7@/j"
    assert run_key({"job": "/j"}) == "job:@/j"
    assert run_key({"job": ""}) is None and run_key({}) is None


def test_an_event_whose_failure_has_a_run_needs_none():
    events = [_event(1, job_dir="/jobs/a", failure_key="ka"),
              _event(2, job_dir="/jobs/b", failure_key="kb"),
              _event(3, job_dir="/jobs/a", failure_key="ka"),  # the same failure re-sent
              _event(4, SUCCEEDED, job_dir="/jobs/ok", job_id="ok"),
              _event(5, "l4.other", job_dir="/jobs/x"),
              _event(6, job_id="no-dir")]  # no directory: nothing to diagnose
    todo = missing(events, {"diag": {"kb"}, "learn": set()}, SPECS, done={},
                   settled_before=LATER)
    assert [(m.deployment_id, m.key, m.event_id) for m in todo] == [
        ("diag", "ka", "e1"), ("learn", "job:ok@/jobs/ok", "e4")]
    assert todo[0].parameters["job"] == "/jobs/a"


def test_a_failed_action_is_not_waited_for_and_a_recent_event_is():
    events = [_event(1, job_dir="/jobs/a"), _event(2, job_dir="/jobs/b"),
              _event(3, job_dir="/jobs/c"), _event(4, job_dir="/jobs/d")]
    done = outcomes([_action(FAILED_ACTION, "e1"), _action(EXECUTED, "e2"),
                     _action(FAILED_ACTION, "e3"), _action(EXECUTED, "e3"),
                     _action("prefect.automation.action.triggered", "e4")])
    assert done == {"e1": {"failed"}, "e2": {"executed"}, "e3": {"failed", "executed"}}
    # the trigger is still behind on all of them (none received before settled_before)
    todo = missing(events, {}, SPECS, done=done, settled_before=T0)
    assert [m.event_id for m in todo] == ["e1"]
    # long after: the event the trigger never acted on gets its run too
    todo = missing(events, {}, SPECS, done=done, settled_before=LATER)
    assert [m.event_id for m in todo] == ["e1", "e4"]


@given(st.lists(st.tuples(st.sampled_from([FAILED, SUCCEEDED]), st.integers(0, 6),
                          st.booleans()), max_size=30),
       st.sets(st.integers(0, 6)))
def test_every_event_ends_with_exactly_one_run_per_failure(raw, have):
    events = [_event(i, name, job_dir=f"/jobs/{j}", **({"failure_key": f"k{j}"} if keyed else {}))
              for i, (name, j, keyed) in enumerate(raw)]
    existing = {"diag": {f"k{j}" for j in have}, "learn": set()}
    todo = missing(events, existing, SPECS, done={}, settled_before=LATER)
    for dep in ("diag", "learn"):
        made = [m.key for m in todo if m.deployment_id == dep]
        assert len(made) == len(set(made))  # never two runs for one failure
        assert not set(made) & existing[dep]  # never one for a failure that has a run
        wanted = {run_key(render(SPECS[e.name][1], e.payload)) for e in events
                  if SPECS[e.name][0] == dep}
        assert wanted <= set(made) | existing[dep]  # and every failure has its run
