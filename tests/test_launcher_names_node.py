"""Who names whom, when the launcher or the collective layer names the node it lost.

Why: when a whole node drops off (a power loss), its log just stops, as silent as every
other worker's log under mpirun, where rank 0 alone prints the iterations.  No clock says
who stopped first.  The platform does say it: Open MPI's head prints "ORTE has lost
communication with a remote daemon. ... Remote daemon: [[14709,0],3] on node cn0245".
And when one rank hangs, Horovod's stall inspector on rank 0 lists the ranks the others
wait for ("Missing ranks:" and then "5: [allreduce.grad.h.51 ...]", one line per rank),
and mpirun's tags ("[1,5]<stdout>:") say where rank 5 runs.  The loud head node is not
the culprit in either case.
"""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

HOSTS = ("cn0242", "cn0243", "cn0244", "cn0245")
RPN = 2

ORTE_LOST = """--------------------------------------------------------------------------
ORTE has lost communication with a remote daemon.

  HNP daemon   : [[14709,0],0] on node cn0242
  Remote daemon: [[14709,0],{k}] on node {host}

This is usually due to either a failure of the TCP network
connection to the node, or possibly an internal failure of
the daemon itself. We cannot recover from this failure, and
therefore will terminate the job.
--------------------------------------------------------------------------"""


def node_log(k: int, *, iters: int, tail: list[str] | None = None, day: int = 14) -> str:
    out = []
    for lr in range(RPN):
        g = k * RPN + lr
        out.append(f"[1,{g}]<stdout>:{HOSTS[k]}:4972{lr}:4972{lr} [0] NCCL INFO Bootstrap : Using eth0:10.77.0.{10 + k}<0>")
    if k == 0:
        for it in range(1, iters + 1):
            out.append(f"[1,0]<stdout>:2025-03-{day} 17:{it // 60:02d}:{it % 60:02d},527 - INFO - train_hvd.py:257 - "
                       f"step {it * 100}/6000 loss={2.6 - 0.001 * it:.4f} (1.772 s/it)")
    return "\n".join(out + (tail or [])) + "\n"


def healthy(tmp_path):
    return write_job(tmp_path / "ok", {h: node_log(k, iters=50, day=10) for k, h in enumerate(HOSTS)},
                     status="succeeded")


def test_the_daemon_the_launcher_lost_is_the_culprit(tmp_path) -> None:
    nodes = {h: node_log(k, iters=30) for k, h in enumerate(HOSTS)}
    nodes["cn0242"] = node_log(0, iters=30, tail=ORTE_LOST.format(k=3, host="cn0245").splitlines())
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy(tmp_path)], store_path=False)
    assert report["nodes"][0]["node"] == "cn0245", [n["node"] for n in report["nodes"]]
    assert report["nodes"][0]["evidence"]["named"] == 1.0


def test_the_rank_the_stall_inspector_misses_is_the_culprit(tmp_path) -> None:
    stall = []
    for minute in range(3):
        stall += [f"[1,0]<stderr>:[2025-03-14 17:3{minute}:23.645537: W /tmp/horovod/common/stall_inspector.cc:107] "
                  "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks "
                  "and are waiting for remainder of ranks for more than 60 seconds. This may indicate that "
                  "different ranks are trying to submit different tensors or that only subset of ranks is "
                  "submitting tensors, which will cause deadlock. ",
                  "[1,0]<stderr>:Missing ranks:",
                  "[1,0]<stderr>:5: [DistributedAdamW.Allreduce.grad.transformer.h.51.attn.c_attn.weight, "
                  "DistributedAdamW.Allreduce.grad.transformer.h.51.mlp.c_fc.weight ...]"]
    stall += ["[1,0]<stderr>:horovod.common.exceptions.HorovodInternalError: Horovod has been shut down. "
              "This was caused by an exception on one of the ranks or an attempt to allreduce, allgather or "
              "broadcast a tensor after one of the ranks finished execution."]
    nodes = {h: node_log(k, iters=30) for k, h in enumerate(HOSTS)}
    nodes["cn0242"] = node_log(0, iters=30, tail=stall)
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy(tmp_path)], store_path=False)
    assert report["nodes"][0]["node"] == "cn0244", [n["node"] for n in report["nodes"]]
