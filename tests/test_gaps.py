"""What healthy runs printed between iterations (``l4.gaps``), on plain data.

Why: a phase worded only once it is over ("validation loss at iteration 35"), or a final
save worded like every other save, leaves a failed job nothing that names it; the healthy
runs' gaps do.  These tests pin how gaps are agreed on, when a gap is too blurred to use,
and how far into a gap a failed job got decides the stage.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from l4.gaps import Gaps, _unambiguous, combine, merge

EVAL = ((28, "evaluation"),)
SAVE = ((6, "checkpointing"), (7, "checkpointing"))


def test_runs_agree_on_gaps_and_on_where_training_ends() -> None:
    a = ({15: SAVE, 35: EVAL}, 50, 1)
    b = ({15: SAVE, 35: EVAL}, 50, 1)
    g = combine([a, b])
    assert g.after == {15: SAVE, 35: EVAL}
    assert g.last == 50


def test_a_gap_only_one_run_of_three_had_is_dropped() -> None:
    g = combine([({15: SAVE}, 50, 1), ({}, 50, 1), ({}, 50, 1)])
    assert g.after == {}


def test_runs_that_end_at_different_iterations_leave_the_end_unknown() -> None:
    g = combine([({}, 50, 1), ({}, 60, 1)])
    assert g.last is None


def test_a_line_printed_after_neighbouring_iterations_is_blurred() -> None:
    # a bar on stderr and a save on stdout: the save landed after 39 on one node, 40 on another
    after = {39: SAVE, 40: SAVE, 75: EVAL}
    assert _unambiguous(after, 1) == {75: EVAL}
    g = combine([({39: SAVE, 75: EVAL}, 80, 1), ({40: SAVE, 75: EVAL}, 80, 1)])
    assert g.after == {75: EVAL}


def test_saves_on_a_grid_are_not_blurred() -> None:
    assert _unambiguous({20: SAVE, 40: SAVE, 60: SAVE}, 1) == {20: SAVE, 40: SAVE, 60: SAVE}


def test_merge_prefers_more_jobs_and_drops_a_disputed_end() -> None:
    few = Gaps(after={15: EVAL}, last=50, jobs=1)
    many = Gaps(after={15: SAVE}, last=60, jobs=3)
    m = merge(few, many, None)
    assert m is not None and m.after[15] == SAVE and m.last is None and m.jobs == 4
    assert merge(None, Gaps()) is None


@given(st.dictionaries(st.integers(1, 200), st.sampled_from([SAVE, EVAL]), max_size=12),
       st.integers(1, 3))
def test_unambiguous_keeps_a_subset_and_no_blurred_pair(after: dict, step: int) -> None:
    out = _unambiguous(after, step)
    for n, gap in out.items():
        assert set(gap) <= set(after[n])
        for cid, _ in gap:
            assert not any(cid in {c for c, _ in out.get(n + d, ())} for d in (step, -step))
