"""A node's stage along its log (``l4.stage._walk``): what ends a save or an evaluation.

Why: a progress bar's last update reaches the log after the banner that followed it (torchrun's
``--tee`` copies stderr and stdout separately), and a bar is redrawn as its process exits.
Read naively, either line was one more training step, and a job that died evaluating was
called training.  And the parser merges lines that differ in one word ("***** Running
training *****", "***** Running Evaluation *****"): the merged event's template names no
stage, its first and last line still do.
"""

from __future__ import annotations

import numpy as np

from l4.stage import _walk

STAGES = ["training", "evaluation", None, "checkpointing"]  # col 0 is the counter
COUNTER = {0}


def _seq(*cols: int) -> np.ndarray:
    return np.array(cols, dtype=np.int64)


def test_a_clockless_counter_needs_two_new_counts_to_end_an_evaluation():
    seq = _seq(0, 0, 1, 0, 0)
    firsts = {0, 1, 3, 4}
    assert _walk(seq, 4, STAGES, counting=(COUNTER, firsts, 2))[:2] == ("evaluation", 1)
    st, _, resumed = _walk(seq, 5, STAGES, counting=(COUNTER, firsts, 2))
    assert (st, resumed) == ("training", True)
    # with a clock one new count is enough, as before
    assert _walk(seq, 4, STAGES, counting=(COUNTER, firsts, 1))[0] == "training"


def test_a_redrawn_count_is_no_step():
    seq = _seq(0, 1, 0, 0, 0)  # after the evaluation only redraws of the last count
    firsts = {0}
    assert _walk(seq, 5, STAGES, counting=(COUNTER, firsts, 1))[0] == "evaluation"
    assert _walk(seq, 5, STAGES)[0] == "training"  # without counts every line is a step


def test_a_new_phase_starts_the_count_again():
    seq = _seq(0, 1, 0, 3, 0, 0)
    firsts = {0, 2, 4, 5}
    # one count after the evaluation, then a save: the save needs its own two counts
    assert _walk(seq, 5, STAGES, counting=(COUNTER, firsts, 2))[0] == "checkpointing"
    assert _walk(seq, 6, STAGES, counting=(COUNTER, firsts, 2))[0] == "training"


def test_a_merged_event_is_staged_by_its_own_text_where_it_is_known():
    seq = _seq(2, 0, 0, 2)  # "Running training" at start-up, "Running Evaluation" later
    said = {3: "evaluation"}
    assert _walk(seq, 4, STAGES)[0] == "training"
    assert _walk(seq, 4, STAGES, said=said)[:2] == ("evaluation", 2)


def test_a_line_that_hands_back_to_training_ends_the_save():
    """NeMo: "... saving model to ..." (checkpointing), "Successfully saved checkpoint from
    iteration 10399" (training by the profile's resume words), then untimed counts, then
    the job was preempted.  The save was seen to end, whatever a clock says later."""
    stages = STAGES + ["training"]  # col 4: the line that ends a save
    seq = _seq(0, 0, 3, 4, 0, 0)
    firsts = {0, 1, 4, 5}
    st, _, resumed = _walk(seq, 6, stages, counting=(COUNTER, firsts, 2))
    assert (st, resumed) == ("training", True)
    # a save announced and not ended stays a save
    assert _walk(seq, 3, stages, counting=(COUNTER, firsts, 2))[0] == "checkpointing"
