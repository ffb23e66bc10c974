"""One logger's frame, another statement: the matcher does not take one fault for another.

A sentence embedding rates two lines that share a long frame as close whatever the frame
says ("srun: error: <host>: tasks 0-3: Aborted (core dumped)" vs "... task 5: Out Of
Memory").  And once numbers are masked, torchrun's "failed (exitcode: 1)" of a worker that
raised reads like "failed (exitcode: -9)" of one the kernel killed.  Both made real
diagnoses suggest an out-of-memory kill for a missing module or a bad config.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from l4.rootcause import frame_conflict, match_lines, stated_reasons

ELASTIC = ("E1205 02:20:45.222000 21091 torch/distributed/elastic/multiprocessing/api.py:1002] "
           "failed (exitcode: {code}) local_rank: 0 (pid: 21367) of binary: /usr/bin/python3")


def test_a_shared_frame_with_other_words_is_a_conflict() -> None:
    assert frame_conflict("srun: error: h1: tasks 0-3: Aborted (core dumped)",
                          "srun: error: <*>: task <*>: Out Of Memory")
    assert frame_conflict("RuntimeError: CUDA error: an illegal memory access was encountered",
                          "RuntimeError: CUDA error: unspecified launch failure")
    assert frame_conflict("OSError: [Errno 22] Invalid argument", "OSError: [Errno 5] Input/output error")


def test_the_same_statement_is_not() -> None:
    assert not frame_conflict("RuntimeError: CUDA error: an illegal memory access was encountered",
                              "CUDA error: an illegal memory access was encountered")
    # a whole shared sentence, then two different explanations: one statement
    assert not frame_conflict(
        "_pickle.UnpicklingError: Weights only load failed. This file can still be loaded",
        "_pickle.UnpicklingError: Weights only load failed. In PyTorch 2.6, we changed the default")
    # too short a shared start to be a frame
    assert not frame_conflict("error: disk full", "error: quota exceeded")


@given(st.text(max_size=120), st.text(max_size=120))
def test_conflict_is_symmetric_and_never_with_itself(a: str, b: str) -> None:
    assert not frame_conflict(a, a)
    assert frame_conflict(a, b) == frame_conflict(b, a)


def test_an_exit_status_of_its_own_is_no_signal_death() -> None:
    assert "SIG_NONE" in stated_reasons(ELASTIC.format(code=1))
    assert "SIG_NONE" in stated_reasons("  exitcode  : 2 (pid: 14750)")
    assert "SIG_NONE" not in stated_reasons(ELASTIC.format(code=-9))
    assert "SIG_NONE" not in stated_reasons("exitcode  : -15 (pid: 1818)  (SIGTERM)")


def test_the_real_library_tells_the_lines_apart(kb: Path) -> None:
    def first(line: str) -> str | None:
        found = match_lines([line], kb=kb)
        return found[0]["pattern_id"] if found else None

    assert first(ELASTIC.format(code=-9)) == "host-oom-killed"
    assert first(ELASTIC.format(code=1)) != "host-oom-killed"
    assert first("srun: error: hgx-171: task 3: Out Of Memory") == "slurm-oom-kill"
    assert first("srun: error: hgx-171: tasks 56-63: Aborted (core dumped)") != "slurm-oom-kill"
