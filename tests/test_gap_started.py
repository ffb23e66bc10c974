"""A job that printed the first lines of a gap between iterations was inside that gap.

Healthy runs save after every 5th iteration: rank 0 prints "Saving the checkpoint" and,
once it is written, "Finished saving the checkpoint".  The failed job saved at 5, 10, 15
and 20 like them; after 25 rank 0 announced the save (naming no iteration) and the
finish never came, because another node's write hung.  The gap after 25 says the job was
checkpointing.  That it had saved before does not make the gap's evidence weaker: a job
that printed nothing of a gap may have stopped for another reason, one that began it
has not.
"""

from __future__ import annotations

from pathlib import Path

from bar_jobs import diagnose_three_nodes

DONE = 25


def _node(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    last = DONE if failed else 40
    rank0 = path.name == "node-0.log"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("INFO root world size 6\nINFO root Preparing c4 dataset\n")
        for it in range(1, last + 1):
            sec = 100 + it * 4
            fh.write(f"2025-04-13 19:{sec // 60:02d}:{sec % 60:02d},100 INFO step: {it}  "
                     f"loss: {7.9 - it / 10:.4f}  wps: 1,908\n")
            if it % 5 == 0 and rank0:
                fh.write(f"2025-04-13 19:{sec // 60:02d}:{sec % 60:02d},200 INFO Saving the "
                         "checkpoint (or staging if async is enabled).\n")
                if not (failed and it == DONE):
                    fh.write(f"2025-04-13 19:{sec // 60:02d}:{sec % 60:02d},900 INFO Finished "
                             "saving the checkpoint in 0.70 seconds.\n")
        if role == "victim":
            fh.write("[E0413 19:50:00.348248736 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog "
                     "caught collective operation timeout: WorkNCCL(SeqNum=765, "
                     "OpType=ALLREDUCE, NumelIn=1, Timeout(ms)=1800000) ran for 1800043 "
                     "milliseconds before timing out.\n")
        elif role == "ok":
            fh.write("INFO root Training completed\n")


def test_a_save_begun_and_never_finished_after_earlier_saves(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _node)
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    assert rep["stage"] == "checkpointing", rep["stage"]
