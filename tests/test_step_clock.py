"""The step in progress, when the counter is printed every 50 steps (``l4.stepclock``).

Three jobs of three nodes whose rank 0 alone prints the counter, at the end of every 50th
step, each step taking 3 s; node 1 fails during step 1337.  The report keeps the interval
the job would print (1350) first, and the step itself must be among the first three:

- the counter lines carry times and node 1's error is a traceback without one, followed
  half a second later by torchrun's timed report;
- node 1 loses power: its log just ends, and its peers' watchdogs say when the collective
  they waited on began (c10d's "[E305 ...] ... ran for 600012 milliseconds", a March date
  printed unpadded);
- the counter lines carry no time but state the step's duration, and a timed checkpoint
  line names the count it saved ("Successfully saved checkpoint from iteration 1000").
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.bar_jobs import diagnose_three_nodes

STEP_S = 3.0
EVERY = 50
FAIL_STEP = 1337
STEPS = 2000
T0 = 1709610000.0  # 2024-03-05 03:40:00 UTC
SAVE_EVERY, SAVE_S = 500, 20.0


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + f",{round((t % 1) * 1000):03d}"


def _c10(t: float) -> str:
    """c10's stamp: month * 100 + day, unpadded ("E305" is 5 March)."""
    g = time.gmtime(t)
    return f"E{g.tm_mon}{g.tm_mday:02d} {time.strftime('%H:%M:%S', g)}.{int((t % 1) * 1e9):09d}"


def _glog(t: float) -> str:
    g = time.gmtime(t)
    return f"E{g.tm_mon:02d}{g.tm_mday:02d} {time.strftime('%H:%M:%S', g)}.{int((t % 1) * 1e6):06d}"


def _timeline(stop: int | None):
    """(step, time it ended, checkpoint end or None) for every step that completed."""
    t = T0 + 60.0
    for n in range(1, (stop if stop is not None else STEPS + 1)):
        t += STEP_S
        saved = None
        if n % SAVE_EVERY == 0:
            t += SAVE_S
            saved = t
        yield n, t, saved


def _end_of(step: int) -> float:
    """When step ``step`` and any save after it were done."""
    return next(t for n, t, _ in _timeline(None) if n == step)


def _start(fh, rank0: bool) -> None:
    fh.write(f"{_iso(T0)} INFO train: world size 6, 2 ranks per node\n")
    fh.write(f"{_iso(T0 + 30)} INFO train: building dataset from /data/corpus\n")
    if rank0:
        fh.write(f"{_iso(T0 + 59)} INFO train: starting training for {STEPS} steps\n")


def _progress(fh, timed: bool, failed: bool) -> None:
    for n, t, saved in _timeline(FAIL_STEP if failed else None):
        if n % EVERY == 0:
            if timed:
                fh.write(f"{_iso(t - (saved and SAVE_S or 0))} INFO train: step={n} loss=2.31 lr=1e-4\n")
            else:
                fh.write(f"Training epoch 0, iteration {n}/{STEPS} | reduced_train_loss: 2.31 | "
                         f"train_step_timing in s: {STEP_S} | consumed_samples: {n * 256}\n")
        if saved is not None:
            fh.write(f"[NeMo I {_iso(saved)[:19]} dist_ckpt_io:312] Successfully saved checkpoint "
                     f"from iteration {n} to /ckpt/step={n}.ckpt\n")


def _watchdog(fh, rank: int, began: float) -> None:
    ran = 600012 + rank
    fh.write(f"[rank{rank}]:[{_c10(began + ran / 1000)} ProcessGroupNCCL.cpp:616] [Rank {rank}] "
             f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9001, OpType=ALLREDUCE, "
             f"NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for {ran} milliseconds "
             "before timing out.\n")


def _writer(timed: bool, culprit: str):
    fault = _end_of(FAIL_STEP - 1) + 1.5  # during step 1337
    began = _end_of(FAIL_STEP - 1) + 2.5  # where the peers entered its all-reduce

    def write(path: Path, failed: bool, role: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        rank0 = path.stem == "node-0"
        with path.open("w") as fh:
            _start(fh, rank0)
            if rank0:
                _progress(fh, timed, failed)
            else:  # every node saves its shard; only rank 0 counts
                for n, _, saved in _timeline(FAIL_STEP if failed else None):
                    if saved is not None:
                        fh.write(f"{_iso(saved)} INFO ckpt: saved shard {path.stem} of step {n}\n")
            if not failed:
                end = _end_of(STEPS)
                fh.write(f"{_iso(end + 5)} INFO train: training finished\n")
                return
            if role == "crash":
                if culprit == "silent":
                    return  # lost power: nothing more reaches its log
                fh.write("[rank2]: Traceback (most recent call last):\n"
                         '[rank2]:   File "train.py", line 336, in main\n'
                         "[rank2]:     loss.backward()\n"
                         "[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
                fh.write(f"{_glog(fault + 0.5)} 77 torch/distributed/elastic/multiprocessing/api.py:869]"
                         " failed (exitcode: 1) local_rank: 0 (pid: 77) of binary: python\n")
                return
            _watchdog(fh, 0 if rank0 else 4, began)
            fh.write(f"{_glog(began + 601)} 91 torch/distributed/elastic/multiprocessing/api.py:869]"
                     " failed (exitcode: -6) local_rank: 0 (pid: 91) of binary: python\n")
    return write


@pytest.mark.parametrize("timed,culprit", [(True, "traceback"), (True, "silent"), (False, "traceback")],
                         ids=["timed-counter-untimed-error", "timed-counter-silent-node",
                              "untimed-counter-checkpoint-anchor"])
def test_the_step_in_progress_is_found_between_printed_counts(tmp_path, monkeypatch, timed, culprit):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _writer(timed, culprit))
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    its = [i["iteration"] for i in rep["iterations"]]
    assert its[0] == 1350, its  # the interval the job would have printed
    assert FAIL_STEP in its[:3], its
