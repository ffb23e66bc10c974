"""A pack of nodes stating the cause, and the one node that only timed out waiting.

Every node that wrote its shard of a checkpoint to a full shared volume says so ("No
space left on device"); the nodes with nothing to write wait in the next collective and
time out.  By counts and by their own copies of the timeout they are the odd ones out, yet
the job told its cause through the pack: the culprit is one of the nodes that state it.
"""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

HOSTS = tuple(f"node-{k}" for k in range(8))


def _log(k: int, *, failed: bool, writes: bool) -> str:
    out = [f"[rank{8 * k}]: step {it} | loss {3 + 1 / it:.4f} | 812.0 ms" for it in range(1, 41)]
    if not failed:
        return "\n".join(out + [f"[rank{8 * k}]: training done"]) + "\n"
    out.append(f"[rank{8 * k}]: saving checkpoint at step 40")
    if writes:
        out += [f"[rank{8 * k}]: Traceback (most recent call last):",
                f'[rank{8 * k}]:   File "/opt/train/ckpt.py", line 88, in save_shard',
                f"[rank{8 * k}]:     torch.save(state, path)",
                f"[rank{8 * k}]: OSError: [Errno 28] No space left on device: '/shared/ckpt/step40/shard{k}.pt'"]
    else:
        out += [f"[rank{8 * k}]: [E ProcessGroupNCCL.cpp:616] [Rank {8 * k}] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=4121, OpType=ALLGATHER, NumelIn=1, "
                "Timeout(ms)=600000) ran for 600031 milliseconds before timing out.",
                f"[rank{8 * k}]: [E ProcessGroupNCCL.cpp:630] [Rank {8 * k}] To avoid data inconsistency, "
                "we are taking the entire process down."]
    out.append(f"ERROR:launcher:Global rank {8 * k} (PID {4000 + k}) exited with code 1")
    return "\n".join(out) + "\n"


def test_the_culprit_is_one_of_the_nodes_stating_the_cause(tmp_path):
    healthy = write_job(tmp_path / "ok", {h: _log(k, failed=False, writes=True) for k, h in enumerate(HOSTS)},
                        status="succeeded")
    failed = write_job(tmp_path / "failed", {h: _log(k, failed=True, writes=k not in (5, 6))
                                             for k, h in enumerate(HOSTS)})
    report = diagnose(failed, baselines=[healthy], store_path=False)
    assert report["nodes"][0]["node"] not in ("node-5", "node-6"), report["nodes"][:2]
    assert {n["node"] for n in report["nodes"][-2:]} == {"node-5", "node-6"}


def _report_log(k: int, *, failed: bool, culprit: int) -> str:
    out = [f"[rank{8 * k}]: step {it} | loss {3 + 1 / it:.4f} | 812.0 ms" for it in range(1, 41)]
    if not failed:
        return "\n".join(out + [f"[rank{8 * k}]: training done"]) + "\n"
    out.append(f"[rank{8 * k}]: saving checkpoint at step 40")
    out.append(f"[rank{8 * k}]: RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos "
               f"{1083156092 + k} vs {1083155592 + k}")
    if k != culprit:
        out.append(f"[rank{8 * k}]: torch.distributed.checkpoint.api.CheckpointException: "
                   f"CheckpointException ranks:dict_keys([{8 * culprit}])")
    out.append("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:")
    return "\n".join(out) + "\n"


def test_a_lone_node_lacking_the_peers_report_on_it_stays_the_culprit(tmp_path):
    """The checkpoint writer failed on one rank; the error reaches every rank, and every
    other rank also reports which rank failed.  The one node without that report, and
    with nothing of its own, is the culprit: one node lacking is no pack of echoes."""
    healthy = write_job(tmp_path / "ok", {h: _report_log(k, failed=False, culprit=3) for k, h in enumerate(HOSTS)},
                        status="succeeded")
    failed = write_job(tmp_path / "failed", {h: _report_log(k, failed=True, culprit=3)
                                             for k, h in enumerate(HOSTS)})
    report = diagnose(failed, baselines=[healthy], store_path=False)
    assert report["nodes"][0]["node"] == "node-3", report["nodes"][:2]
