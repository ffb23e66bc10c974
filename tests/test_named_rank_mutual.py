"""Who names whom, when two nodes name each other: a collective mismatch.

With TORCH_DISTRIBUTED_DEBUG=DETAIL every rank compares its collective with the others':
ranks 0, 1 and 2 report "... but Rank 3 is running collective: ...ALLREDUCE", and rank 3
reports "... but Rank 0 is running collective: ...BROADCAST".  By node, the two nodes
name each other; by rank, three ranks (one of them on rank 3's own node) name rank 3, and
one names rank 0.  The node named twice as often as any other is the one named.
"""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

HOSTS = ("h100-297", "h100-298", "h100-299")
# as c10d prints it: the rank it names comes some 330 characters into the line
FP = ("CollectiveFingerPrint(SequenceNumber=24016, OpType={op}, TensorShape=[{n}], "
      "TensorDtypes={dt}, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, "
      "layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), "
      "memory_format=(nullopt)))")
BCAST = FP.format(op="BROADCAST", n=1, dt="Long")
AR = FP.format(op="ALLREDUCE", n=5, dt="Float")


def _mismatch(rank: int, mine: str, other: int, theirs: str) -> str:
    return (f"[rank{rank}]: RuntimeError: Detected mismatch between collectives on ranks. Rank {rank} "
            f"is running collective: {mine}, but Rank {other} is running collective: {theirs}.")


def _node(k: int, steps: int, failed: bool) -> str:
    out = [f"[rank{2 * k + r}]:[W615 21:00:0{k}.000000000 ProcessGroupNCCL.cpp:4115] [PG 0 Rank {2 * k + r}] "
           "using GPU to perform barrier" for r in range(2)]
    for it in range(1, steps + 1):
        if k == 0:
            out.append(f"2024-06-15 21:{it // 60:02d}:{it % 60:02d},000 INFO train: step {it} loss 2.31")
    if not failed:
        out.append("2024-06-15 22:00:00,000 INFO train: done")
    elif k == 0:
        out += [_mismatch(0, BCAST, 3, AR), _mismatch(1, BCAST, 3, AR)]
    elif k == 1:
        out += [_mismatch(3, AR, 0, BCAST), _mismatch(2, BCAST, 3, AR)]
    else:
        out += [f"[rank: {r}] Received SIGTERM: 15" for r in (4, 5)]
    return "\n".join(out) + "\n"


def test_the_rank_its_peers_all_name_is_named_though_it_names_one_back(tmp_path):
    failed = write_job(tmp_path / "failed", {h: _node(k, 120, True) for k, h in enumerate(HOSTS)})
    base = write_job(tmp_path / "base", {h: _node(k, 200, False) for k, h in enumerate(HOSTS)},
                     status="succeeded")
    rep = diagnose(failed, baselines=[base], store_path=tmp_path / "t.drain3")
    named = {n["node"]: n["evidence"]["named_by_peers"] for n in rep["nodes"]}
    assert named["h100-298"] > 0.0 and named["h100-297"] == 0.0, named
