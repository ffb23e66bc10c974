"""The step in progress read from the collective the ranks were in (``l4.seqstep``).

Three nodes; rank 0 prints the counter every 50 steps with no clock and no other timed
line names a count, so time cannot date the failure.  Node 1 loses power during step
1337; the others' watchdogs give up on the collective they were in, whose number is the
12 all-reduces of each step counted from the start ("WorkNCCL(SeqNum=16045, ...)").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from l4.seqstep import steps_from_sequence
from l4.temporal import spread_steps
from tests.bar_jobs import diagnose_three_nodes

EVERY = 50
FAIL_STEP = 1337
STEPS = 2000
PER_STEP = 12  # collectives a step issues


def _writer(name_the_collective: bool):
    seq = FAIL_STEP * PER_STEP + 5  # the 6th of step 1337's collectives

    def write(path: Path, failed: bool, role: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        rank0 = path.stem == "node-0"
        last = FAIL_STEP - 1 if failed else STEPS
        with path.open("w") as fh:
            fh.write("2024-03-05 03:40:00,000 INFO train: world size 6, 2 ranks per node\n")
            fh.write("2024-03-05 03:40:30,000 INFO train: building dataset from /data/corpus\n")
            if rank0:
                for n in range(EVERY, last + 1, EVERY):
                    fh.write(f"Training epoch 0, iteration {n}/{STEPS} | reduced_train_loss: 2.31 | "
                             f"train_step_timing in s: 3.0 | consumed_samples: {n * 256}\n")
            if not failed:
                fh.write("2024-03-05 05:21:10,000 INFO train: training finished\n")
                return
            if role == "crash":
                return  # lost power: nothing more reaches its log
            rank = 0 if rank0 else 4
            if name_the_collective:
                fh.write(f"[rank{rank}]:[E305 04:48:11.105000000 ProcessGroupNCCL.cpp:616] [Rank {rank}] "
                         f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
                         "OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) "
                         f"ran for 600012 milliseconds before timing out.\n")
            else:
                fh.write(f"[rank{rank}]:[E305 04:48:11.105000000 ProcessGroupGloo.cpp:144] [Rank {rank}] "
                         "Gloo connectFullMesh failed: Connection reset by peer\n")
            fh.write("E0305 04:48:12.000000 91 torch/distributed/elastic/multiprocessing/api.py:869]"
                     " failed (exitcode: -6) local_rank: 0 (pid: 91) of binary: python\n")
    return write


def test_the_collectives_count_the_step_that_the_clocks_cannot(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _writer(True))
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    its = [i["iteration"] for i in rep["iterations"]]
    assert its[0] == 1350, its  # the interval the job would have printed
    assert its[1] == FAIL_STEP, its


def test_without_a_named_collective_the_interval_is_all_there_is(tmp_path, monkeypatch):
    """The counterfactual: the same job whose peers name no collective cannot place the
    step inside the interval; the interval's end comes first, then two steps spread over
    the rest of it (``spread_steps``), then the step just printed."""
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _writer(False))
    its = [i["iteration"] for i in rep["iterations"]]
    assert its[:4] == [1350, 1313, 1336, 1300], its


@given(end=st.integers(10, 10**6), step=st.integers(4, 500))
def test_spread_steps_cover_the_interval_as_well_as_two_answers_can(end, step):
    """With the interval's end listed first, the two spread steps lie inside the interval
    and leave at most ``max(0, step - 8) + 2`` of its ``step`` steps more than one away
    from a listed step (three steps each cover three; none can do better than that)."""
    a, b = spread_steps(end, step)
    assert end - step < a <= b < end
    listed = (end, a, b)
    missed = [s for s in range(end - step + 1, end + 1) if all(abs(s - x) > 1 for x in listed)]
    assert len(missed) <= max(0, step - 8) + 2, (a, b, missed)
    if step <= 8:
        assert len(missed) <= 2


@given(f=st.integers(2, 10**6), k=st.integers(1, 400), every=st.integers(2, 500),
       j=st.integers(0, 399), ahead=st.booleans())
def test_one_count_per_step_fits_when_the_interval_is_narrow(f, k, every, j, ahead):
    """Collective ``seq`` of step ``f`` (``k`` per step, numbered from 1) lands in the
    printed interval for exactly one ``k`` when neighbouring ``k`` put it further away
    than the interval is wide; and whatever is returned lies inside the interval."""
    seq = f * k + 1 + j % k
    current = ((f + every - 1) // every) * every  # the count the job would print next
    if ahead:  # the pack had printed the count the culprit was in: one interval later
        current += every
    got = steps_from_sequence(seq, current, every)
    assert all(current - every < g <= current for g in got)
    if not ahead and f / (k + 1) > every + 2 and current - every >= 1:
        assert got == [f]


@pytest.mark.parametrize("seq,current,every,expected", [
    (99449, 8300, 20, [8287]),     # 12 collectives a step
    (3506, 1170, 10, [1168]),      # 3 a step
    (100, 60, 50, []),             # early in the job every k fits somewhere
    (5, 1000, 50, []),             # a number smaller than the step: another group's count
])
def test_steps_from_sequence_examples(seq, current, every, expected):
    assert steps_from_sequence(seq, current, every) == expected


SPIKE_STEP = 400  # one slow step long before the failure, after which training went on


def _spiky_writer():
    inner = _writer(False)

    def write(path: Path, failed: bool, role: str) -> None:
        inner(path, failed, role)
        if failed and path.stem == "node-0":
            text = path.read_text().replace(
                f"iteration {SPIKE_STEP}/{STEPS} | reduced_train_loss: 2.31 | train_step_timing in s: 3.0",
                f"iteration {SPIKE_STEP}/{STEPS} | reduced_train_loss: 2.31 | train_step_timing in s: 41.0")
            path.write_text(text)
    return write


def test_a_slow_step_long_before_the_crash_is_listed_after_the_crash_interval(tmp_path, monkeypatch):
    """One step 14 times slower at step 400, then 900 steps of normal training, then a
    crash in the interval 1301-1350: the crash's interval fills the first three answers
    (the paper's 10-iteration window: a spike that ended 10 printed counts before the
    failure did not bring the job down), and the slow step is still listed after them."""
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _spiky_writer())
    its = [i["iteration"] for i in rep["iterations"]]
    assert its[:3] == [1350, 1313, 1336], its
    assert SPIKE_STEP in its, its
