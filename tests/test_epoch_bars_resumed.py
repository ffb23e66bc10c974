"""Progress bars per epoch of a job resumed mid-run, and a bar that gains a field.

Lightning draws one tqdm bar per epoch ("Epoch 3:  60%|...| 120/200 [...]"), counting
from 1 again in every epoch, and adds ``val_loss=`` to it once the first validation ran.
A job resumed from a checkpoint starts drawing in the middle of an epoch that is not the
first.  The steps it made are the epochs before that one plus the count: "Epoch 3:
120/200" is step 720, not 120 and not 320 (one epoch seen to end after the first bar).
The bar without the new field and the bar with it are one counter: a job that failed
before its first validation printed only the first, and its healthy runs mostly the
second.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bar_jobs import diagnose_three_nodes

PER_EPOCH = 200
RESUME = (2, 50)  # the checkpoint: epoch 2, step 50 of it
EVERY = 5
LAST_EPOCH = 5


def _bar(epoch: int, k: int, val: bool) -> str:
    pct = 100 * k // PER_EPOCH
    fill = "█" * (pct // 10)
    extra = ", val_loss=2.190" if val else ""
    return (f"\rEpoch {epoch}: {pct:3d}%|{fill:<10}| {k}/{PER_EPOCH} "
            f"[{k // 60:02d}:{k % 60:02d}<{(PER_EPOCH - k) // 60:02d}:{(PER_EPOCH - k) % 60:02d}, "
            f"1.00s/it, v_num=7, train_loss=3.{k % 97:03d}{extra}]")


def _writer(crash_at: tuple[int, int]):
    """A log writer for ``diagnose_three_nodes``: node 1 crashes in step ``crash_at``
    (epoch, step of it) in progress; the bar shows ``val_loss`` from epoch 3 on."""

    def write(path: Path, failed: bool, role: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        out = ["2025-05-02 08:00:00 INFO train: world size 6, resuming from "
               "/ckpt/last.ckpt\n"]
        stop = crash_at if failed else (LAST_EPOCH, PER_EPOCH)
        epoch, k = RESUME
        while (epoch, k) < stop:
            line = []
            while k <= PER_EPOCH and (epoch, k) < stop:
                if k % EVERY == 0 or k == 1:
                    line.append(_bar(epoch, k, val=epoch >= 3))
                k += 1
            out.append("".join(line) + "\n")
            if k > PER_EPOCH:
                epoch, k = epoch + 1, 1
        if not failed:
            out.append("2025-05-02 12:00:00 INFO train: training finished\n")
        elif role == "crash":
            out.append("RuntimeError: CUDA error: an illegal memory access was encountered\n")
        else:
            out.append("[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation "
                       "timeout: WorkNCCL(SeqNum=9369, OpType=ALLREDUCE, Timeout(ms)=600000) ran for "
                       "600283 milliseconds before timing out.\n")
        path.write_text("".join(out))

    return write


@pytest.mark.parametrize("crash_at", [(3, 123), (4, 61)])
def test_a_resumed_bar_counts_the_epochs_before_its_first_line(tmp_path, monkeypatch, crash_at):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _writer(crash_at))
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    assert rep["stage"] == "training"
    step = crash_at[0] * PER_EPOCH + crash_at[1]
    its = [i["iteration"] for i in rep["iterations"]]
    assert its and step - EVERY <= its[0] <= step + EVERY, its


def test_a_bar_before_its_first_validation_is_the_counter_of_its_healthy_runs(tmp_path,
                                                                              monkeypatch):
    """The job failed in epoch 2, before any bar showed ``val_loss``."""
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _writer((2, 163)))
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    assert rep["stage"] == "training"
    its = [i["iteration"] for i in rep["iterations"]]
    assert its and 2 * PER_EPOCH + 160 <= its[0] <= 2 * PER_EPOCH + 165, its
