"""Numbers that advance at start-up are no iteration counter.

NCCL's "Channel 00/08 : 0[0] -> 1[0] [send] via NET/IB/0" lines count channels, and
its error-return trace ("misc/socket.cc:47 -> 6") prints source lines followed by a
constant code.  A job that died loading its checkpoint never counted a step: healthy runs
of the same configuration printed those lines only before their steps began.
"""

from __future__ import annotations

from pathlib import Path

from bar_jobs import diagnose_three_nodes

from l4.scan import _periods


def _node(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = int(path.stem.split("-")[1])
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("initializing torch distributed ...\n")
        for ch in range(12):
            fh.write(f"host{n}:4242:4300 [0] NCCL INFO Channel {ch:02d}/12 : {n}[0] -> "
                     f"{(n + 1) % 3}[0] [send] via NET/IB/0/GDRDMA\n")
        fh.write("loading checkpoint from /ckpt/iter_0001000 ...\n")
        if failed and role == "crash":
            fh.write('Traceback (most recent call last):\n  File "train.py", line 41, in '
                     "<module>\n    load_checkpoint(model)\nRuntimeError: Error(s) in loading "
                     "state_dict for GPTModel: size mismatch for embedding.weight\n")
            return
        if failed:
            fh.write(f"host{n}:4242:4301 [0] NCCL INFO misc/socket.cc:47 -> 6\n"
                     f"host{n}:4242:4301 [0] NCCL INFO misc/socket.cc:750 -> 6\n"
                     f"host{n}:4242:4301 [0] NCCL INFO transport/net.cc:677 -> 6\n" * 3)
            fh.write("[E ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective "
                     "operation timeout: WorkNCCL(SeqNum=3, OpType=BROADCAST, NumelIn=1, "
                     "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n")
            return
        fh.write("successfully loaded checkpoint at iteration 1000\n")
        for it in range(1001, 1061):
            fh.write(f" iteration {it:6d}/ 2000 | loss: {7.9 - it / 1e4:.4f} |\n")
        fh.write("training done\n")


def test_a_job_that_died_at_start_up_counted_no_step(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _node)
    assert rep["nodes"][0]["node"] == "node-1"
    assert rep["stage"] != "training", rep["stage"]
    assert not rep["iterations"], rep["iterations"]


def test_a_count_past_its_total_is_no_fraction():
    # "socket.cc:47 -> 6", "socket.cc:750 -> 6", "net.cc:677 -> 6", again and again
    assert _periods([47, 750, 677] * 4, [6] * 12) is None
    # a real fraction still is one: "7/8", then the next epoch's "1/8"
    assert _periods([5, 6, 7, 8, 1, 2, 3], [8] * 7) == (1, 8)
