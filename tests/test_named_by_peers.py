"""A node whose link failed logs nothing of it; its peers' errors say whom they lost."""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

IPS = {f"gpu-{k:02d}": f"10.4.0.{10 + k}" for k in range(5)}


def node_log(name: str, *, iters: int, lost: str | None = None) -> str:
    out = [f"2025-06-01 08:00:00,000 NCCL INFO Bootstrap : Using eth0:{IPS[name]}<0>",
           "2025-06-01 08:00:01,000 NCCL INFO Using network IB"]
    for it in range(1, iters + 1):
        out.append(f"2025-06-01 08:{it // 60:02d}:{it % 60:02d},500 iteration {it}/ 100 | "
                   f"lm loss: {2 + 1 / it:.4f} |")
    if lost:
        out.append(f"2025-06-01 08:01:00,000 NCCL WARN NET/IB : Got completion from peer "
                   f"{IPS[lost]}<43200> with error 12, opcode 1, len 0, vendor err 129")
        out.append("2025-06-01 08:01:00,100 RuntimeError: NCCL communicator was aborted")
    return "\n".join(out) + "\n"


def test_the_node_its_peers_lost_comes_first(tmp_path):
    culprit = "gpu-03"
    nodes = {n: node_log(n, iters=40, lost=None if n == culprit else culprit) for n in IPS}
    # the culprit's own log goes on as long as the others' and shows nothing wrong
    failed = write_job(tmp_path / "failed", nodes)
    healthy = write_job(tmp_path / "ok", {n: node_log(n, iters=40) for n in IPS},
                        status="succeeded")
    report = diagnose(failed, [healthy], store_path=False)
    top = report["nodes"][0]
    assert top["node"] == culprit
    assert top["evidence"]["named_by_peers"] == 1.0
    assert all(n["evidence"]["named_by_peers"] == 0.0 for n in report["nodes"][1:])


def test_an_address_everyone_prints_names_nobody(tmp_path):
    """Every rank dials the rendezvous host and prints its address: that address in
    everyone's errors is no evidence against the node that serves it."""
    def with_master(text: str) -> str:
        return "2025-06-01 07:59:59,000 MASTER_ADDR=10.4.0.10 MASTER_PORT=29500\n" + text

    nodes = {n: with_master(node_log(n, iters=40, lost="gpu-00")) for n in IPS}
    nodes["gpu-00"] = with_master(node_log("gpu-00", iters=40))
    failed = write_job(tmp_path / "failed", nodes)
    healthy = write_job(tmp_path / "ok", {n: with_master(node_log(n, iters=40)) for n in IPS},
                        status="succeeded")
    report = diagnose(failed, [healthy], store_path=False)
    assert all(n["evidence"]["named_by_peers"] == 0.0 for n in report["nodes"])


def test_when_most_nodes_are_named_nobody_stands_out(tmp_path):
    """Resets all round (each node names its ring neighbour): no node is singled out."""
    storm = {n: node_log(n, iters=40, lost=f"gpu-{(int(n[-2:]) + 1) % 5:02d}") for n in IPS}
    healthy = write_job(tmp_path / "ok", {n: node_log(n, iters=40) for n in IPS},
                        status="succeeded")
    report = diagnose(write_job(tmp_path / "storm", storm), [healthy], store_path=False)
    assert all(n["evidence"]["named_by_peers"] == 0.0 for n in report["nodes"])


def _quiet_nccl_log(name: str, *, iters: int, peer: str | None = None, failed: bool = True) -> str:
    """NCCL_DEBUG=WARN: no start-up line shows a node's address; NCCL's completion error
    states both ends ("localGid ::ffff:<own>", "peer <theirs>")."""
    out = [f"2025-06-01 08:{it // 60:02d}:{it % 60:02d},500 iteration {it}/ 100 | "
           f"lm loss: {2 + 1 / it:.4f} |" for it in range(1, iters + 1)]
    if peer:
        out.append(f"{name}:4711:4790 [0] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion "
                   f"from peer {IPS[peer]}<43200> with error 12, opcode 0, len 0, vendor err 129 "
                   f"(Send) localGid ::ffff:{IPS[name]} remoteGids::ffff:{IPS[peer]}")
    if failed:
        out.append("2025-06-01 08:01:00,100 torch.distributed.DistBackendError: NCCL communicator "
                   "was aborted on rank 0")
    return "\n".join(out) + "\n"


def test_peers_named_by_address_when_only_errors_show_whose_address_it_is(tmp_path):
    """The link of gpu-03 failed: both its ring neighbours name its address, it names one
    of theirs.  Whose address is whose is read from each error's own end (localGid)."""
    lost = {"gpu-02": "gpu-03", "gpu-04": "gpu-03", "gpu-03": "gpu-04"}
    nodes = {n: _quiet_nccl_log(n, iters=40, peer=lost.get(n)) for n in IPS}
    healthy = write_job(tmp_path / "ok", {n: _quiet_nccl_log(n, iters=40, failed=False) for n in IPS},
                        status="succeeded")
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy], store_path=False)
    ev = {n["node"]: n["evidence"] for n in report["nodes"]}
    assert report["nodes"][0]["node"] == "gpu-03", [n["node"] for n in report["nodes"]]
    assert ev["gpu-03"]["named_by_peers"] > ev["gpu-04"]["named_by_peers"] > 0
