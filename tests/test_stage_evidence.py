"""Where in the job a failure happened, from the evidence an SRE would use.

Hand-made Megatron-style jobs whose node clocks disagree by seconds (as real ones do): the
rank that fails prints nothing but its error, rank 0 announces saves, the last rank prints
iterations and validation results.  The stage must come from what the job announced and
the iteration numbers those announcements carry, not from comparing skewed clocks.
"""

from __future__ import annotations

import datetime as dt

import pytest

from conftest import XID79, write_job
from l4.engine import diagnose

N_NODES = 4
CULPRIT = 1
SAVE_EVERY = 50
EVAL_EVERY = 25


def _node_log(rank: int, *, n_iters: int, fail: tuple[int, str] | None, skew: float,
              final: bool) -> str:
    """One node's log.  ``fail = (iteration, phase)``: the fault strikes after iteration
    ``iteration`` completed, while the job was in ``phase`` ("training" = during the next
    iteration, "evaluation", "checkpointing" or "finalization")."""
    t = 1714564800.0 + skew  # 2024-05-01 12:00:00 UTC

    def stamp(offset: float) -> str:
        when = dt.datetime.fromtimestamp(t + offset, dt.UTC)
        return when.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]

    last = N_NODES - 1
    out = [f"{stamp(0)} using world size: 32, data-parallel size: 4",
           f"{stamp(1)} > building train, validation, and test datasets ...",
           f"{stamp(2)} building GPT model ...",
           f"{stamp(3)} [rank{rank * 8}] NCCL INFO comm 0x1 rank {rank * 8} nranks 32 - Init COMPLETE"]
    clock = 10.0
    for it in range(1, n_iters + 1):
        clock += 2.0
        if fail and fail[1] == "training" and it == fail[0] + 1:
            if rank == CULPRIT:
                out.append(f"{stamp(clock - 1)} {XID79}")
                return "\n".join(out) + "\n"
            break  # nobody completes the iteration the culprit died in
        if rank == last:
            out.append(f"{stamp(clock)}  iteration {it:8d}/ {n_iters:8d} | consumed samples: "
                       f"{it * 512} | elapsed time per iteration (ms): {2000 + it % 7:.1f} |")
        out.append(f"{stamp(clock)} [rank{rank * 8}] time (ms) | forward-compute: {600 + it % 5}.0")
        if fail and fail[0] == it and fail[1] != "training":
            phase = fail[1]
            if phase == "checkpointing" and rank == 0:
                out.append(f"{stamp(clock + 0.2)} saving checkpoint at iteration {it:7d} to /ckpt "
                           "in torch_dist format")
            if phase == "finalization" and rank == last:
                out.append(f"{stamp(clock + 0.2)} [after training is done] datetime: {stamp(clock)}")
            if phase == "finalization" and rank == 0:
                out.append(f"{stamp(clock + 0.4)} saving checkpoint at iteration {it:7d} to /ckpt "
                           "in torch_dist format")
            if rank == CULPRIT:
                out.append(f"{stamp(clock + 3)} {XID79}")
                return "\n".join(out) + "\n"
            # the others wait in the collective until the watchdog gives up
            out.append(f"{stamp(clock + 600)} [rank{rank * 8}]:[E ProcessGroupNCCL.cpp:1234] "
                       f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={it}, "
                       "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.")
            return "\n".join(out) + "\n"
        if it % EVAL_EVERY == 0 and it != n_iters:
            clock += 5.0
            if rank == last:
                out.append(f"{stamp(clock)}  validation loss at iteration {it} | lm loss value: "
                           f"{5 - it / 100:.6E} |")
        if it % SAVE_EVERY == 0 and it != n_iters and rank == 0:
            out.append(f"{stamp(clock + 0.2)} saving checkpoint at iteration {it:7d} to /ckpt "
                       "in torch_dist format")
            clock += 8.0
            out.append(f"{stamp(clock)}   successfully saved checkpoint from iteration {it:7d} "
                       "to /ckpt [ t 1/8, p 1/4 ]")
    if fail and fail[1] == "training":
        # the job stopped in the iteration after fail[0]: the rest time out
        out.append(f"{stamp(clock + 600)} [rank{rank * 8}]:[E ProcessGroupNCCL.cpp:1234] "
                   f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={fail[0]}, "
                   "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.")
        return "\n".join(out) + "\n"
    if final and rank == last:
        out.append(f"{stamp(clock + 0.2)} [after training is done] datetime: {stamp(clock)}")
    if final and rank == 0:
        out.append(f"{stamp(clock + 0.4)} saving checkpoint at iteration {n_iters:7d} to /ckpt "
                   "in torch_dist format")
        out.append(f"{stamp(clock + 9)}   successfully saved checkpoint from iteration "
                   f"{n_iters:7d} to /ckpt [ t 1/8, p 1/4 ]")
    return "\n".join(out) + "\n"


#: node clocks: off by seconds from each other, enough to reorder lines across nodes
SKEWS = (0.0, -4.0, 3.5, 5.0)


def _job(root, *, n_iters: int, fail: tuple[int, str] | None):
    nodes = {f"node-{r}": _node_log(r, n_iters=n_iters, fail=fail, skew=SKEWS[r],
                                    final=fail is None)
             for r in range(N_NODES)}
    return write_job(root, nodes, status="failed" if fail else "succeeded",
                     framework="megatron")


@pytest.fixture
def baselines(tmp_path):
    return [_job(tmp_path / f"base{i}", n_iters=120 + 30 * i, fail=None) for i in range(2)]


@pytest.mark.parametrize(("fail", "stage", "iteration"), [
    ((100, "checkpointing"), "checkpointing", None),  # rank 0 announced the save at 100
    ((101, "training"), "training", 102),  # the save at 100 finished; 101 done, 102 failed
    ((75, "evaluation"), "evaluation", None),  # nobody announces it; the schedule says so
    ((120, "finalization"), "finalization", None),  # the last save, after training ended
])
def test_stage_from_announcements_and_iteration_numbers(tmp_path, baselines, fail, stage,
                                                        iteration):
    n_iters = 120
    failed = _job(tmp_path / "failed", n_iters=n_iters, fail=fail)
    report = diagnose(failed, baselines)
    assert report["nodes"][0]["node"] == f"node-{CULPRIT}"
    assert report["stage"] == stage
    if iteration is not None:
        assert report["iterations"][0]["iteration"] == iteration


def test_a_node_the_scheduler_names_as_failed_comes_first(tmp_path, baselines):
    """A node that dies with its host logs nothing, not even a late line; Slurm cancels
    the step everywhere else and says which node it was.  The loudest node is the one
    that reports it."""
    nodes = {f"node-{r}": _node_log(r, n_iters=60, fail=None, skew=SKEWS[r], final=False)
             for r in range(N_NODES)}
    for r in range(N_NODES):
        if r != CULPRIT:
            nodes[f"node-{r}"] += (
                f"slurmstepd: error: *** STEP 1234.0 ON node-{r} CANCELLED AT "
                "2024-05-01T12:20:00 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***\n")
    nodes["node-0"] += (f"srun: error: Node failure on node-{CULPRIT}\n"
                        "srun: error: Timed out waiting for job step to complete\n")
    failed = write_job(tmp_path / "failed", nodes, framework="megatron")
    report = diagnose(failed, baselines)
    assert report["nodes"][0]["node"] == f"node-{CULPRIT}"
    assert report["nodes"][0].get("parts", {}).get("named", 1.0) == 1.0
