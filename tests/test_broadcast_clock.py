"""The scheduler's cancel reads the clocks (``l4.clocks.broadcast_times``).

Three nodes train with no clock on their progress lines.  Node 1 alone logs trouble: its
watchdog gives up on a collective.  Slurm then cancels the step on every node at once,
and each node's slurmstepd states when.  Node 2's clock runs 21 s behind, so its cancel
line, its last, seems to come 21 s before everyone's end: without a reading of its clock
it "stopped first" and outranked the only node that logged an error.
"""

from __future__ import annotations

from pathlib import Path

from tests.bar_jobs import diagnose_three_nodes

SKEW = {0: 0, 1: 0, 2: -21}


def _hms(sec: int) -> str:
    return f"{13 + sec // 3600:02d}:{sec % 3600 // 60:02d}:{sec % 60:02d}"


def write(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    k = int(path.stem.split("-")[1])
    with path.open("w") as fh:
        fh.write(f"Initializing distributed: GLOBAL_RANK: {2 * k}, MEMBER: {2 * k + 1}/6\n")
        for n in range(1, (1349 if failed else 2000) + 1, 50):
            fh.write(f"Epoch 0:  {n * 100 // 2000}%| | {n}/2000 [train_loss=2.{n % 97:02d}]\n")
        if not failed:
            fh.write("`Trainer.fit` stopped: `max_steps=2000` reached.\n")
            return
        if role == "crash":
            fh.write(f"[rank2]:[E728 {_hms(3544)}.213793512 ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog "
                     "caught collective operation timeout: WorkNCCL(SeqNum=15964, OpType=ALLREDUCE, "
                     "NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800812 milliseconds before "
                     "timing out.\n")
        fh.write(f"slurmstepd: error: *** STEP 6439828.0 ON node-{k} CANCELLED AT "
                 f"2024-07-28T{_hms(3546 + SKEW[k])} ***\n")


def test_a_clock_behind_is_read_from_the_schedulers_cancel(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, write)
    ev = {n["node"]: n["evidence"] for n in rep["nodes"]}
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    assert ev["node-2"]["first_to_stop"] == 0.0 and ev["node-2"]["stopped_first"] == 0.0
