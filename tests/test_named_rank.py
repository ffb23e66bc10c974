"""Who names whom, by rank: Open MPI's head node reports "The first process to do so was:
Process name: [[24721,1],9]", and mpirun's --tag-output prefixes ("[1,9]<stdout>:") say
which node rank 9 ran on.  The head node's report is about that node, not about itself,
however loud it is.  It says who exited first, as a clock would (``first_to_stop``), not
who failed: after a hang the first to exit is the peer whose timeout fired first."""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

HOSTS = ("h100-n01", "h100-n02", "h100-n03", "h100-n04")
RPN = 4  # ranks per node
MPI_BLOCK = """--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[24721,1],{rank}]
  Exit code:    1
--------------------------------------------------------------------------"""


def node_log(k: int, *, iters: int, failed_rank: int | None, head: bool) -> str:
    out = []
    for it in range(1, iters + 1):
        for lr in range(RPN):
            g = k * RPN + lr
            out.append(f"[1,{g}]<stdout>:2024-08-28 12:{it // 60:02d}:{it % 60:02d} | local_rank{lr} "
                       f"| iter {it} | 4.85 s/it")
    if failed_rank is not None and failed_rank // RPN == k:
        out.append(f"[1,{failed_rank}]<stderr>:ValueError: sample 4471 has 0 tokens")
    if head and failed_rank is not None:
        out.append(MPI_BLOCK.format(rank=failed_rank))
    return "\n".join(out) + "\n"


def test_the_rank_the_head_node_names_locates_the_culprit(tmp_path):
    healthy = write_job(tmp_path / "ok", {h: node_log(k, iters=40, failed_rank=None, head=k == 0)
                                          for k, h in enumerate(HOSTS)}, status="succeeded")
    nodes = {h: node_log(k, iters=30, failed_rank=9, head=k == 0) for k, h in enumerate(HOSTS)}
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy], store_path=False)
    ev = {n["node"]: n["evidence"] for n in report["nodes"]}
    assert report["nodes"][0]["node"] == "h100-n03", [n["node"] for n in report["nodes"]]
    assert ev["h100-n03"]["first_to_stop"] == 1.0 and ev["h100-n01"]["first_to_stop"] == 0.0


def _mismatch_log(k: int, *, iters: int, odd_rank: int | None, prefixed: bool = True) -> str:
    """torchrun's "[rankN]:" prefixes; with TORCH_DISTRIBUTED_DEBUG=DETAIL every rank's
    collective checker reports the mismatch, naming the rank that runs another collective.
    Without prefixes (the launcher's own --tee files) the checker's message still says
    which rank wrote it ("... on ranks. Rank 9 is running ...")."""
    out = []
    for it in range(1, iters + 1):
        for lr in range(RPN if prefixed else 1):
            lead = f"[rank{k * RPN + lr}]:" if prefixed else ""
            out.append(f"{lead}2024-08-28 12:{it // 60:02d}:{it % 60:02d} step {it} loss 2.5")
    if odd_rank is not None:
        for lr in range(RPN):
            g = k * RPN + lr
            other = 0 if g == odd_rank else odd_rank
            mine, theirs = ("ALLREDUCE", "BROADCAST") if g == odd_rank else ("BROADCAST", "ALLREDUCE")
            lead = f"[rank{g}]: " if prefixed else ""
            out.append(f"{lead}RuntimeError: Detected mismatch between collectives on ranks. Rank {g} is "
                       f"running collective: CollectiveFingerPrint(SequenceNumber=4879, OpType={mine}), but "
                       f"Rank {other} is running collective: CollectiveFingerPrint(SequenceNumber=4879, "
                       f"OpType={theirs}).")
    return "\n".join(out) + "\n"


def test_the_rank_every_peer_says_runs_another_collective_comes_first(tmp_path):
    odd = 2 * RPN + 1  # a rank on the third node
    failed = write_job(tmp_path / "failed", {h: _mismatch_log(k, iters=30, odd_rank=odd)
                                             for k, h in enumerate(HOSTS)})
    healthy = write_job(tmp_path / "ok", {h: _mismatch_log(k, iters=30, odd_rank=None)
                                          for k, h in enumerate(HOSTS)}, status="succeeded")
    report = diagnose(failed, [healthy], store_path=False)
    assert report["nodes"][0]["node"] == HOSTS[2], report["nodes"]
    assert report["nodes"][0]["evidence"]["named_by_peers"] == 1.0


def test_a_rank_that_names_itself_in_its_message_locates_it_without_prefixes(tmp_path):
    odd = 2 * RPN + 3
    failed = write_job(tmp_path / "failed", {h: _mismatch_log(k, iters=30, odd_rank=odd, prefixed=False)
                                             for k, h in enumerate(HOSTS)})
    healthy = write_job(tmp_path / "ok", {h: _mismatch_log(k, iters=30, odd_rank=None, prefixed=False)
                                          for k, h in enumerate(HOSTS)}, status="succeeded")
    report = diagnose(failed, [healthy], store_path=False)
    assert report["nodes"][0]["node"] == HOSTS[2], report["nodes"]
    assert report["nodes"][0]["evidence"]["named_by_peers"] == 1.0
