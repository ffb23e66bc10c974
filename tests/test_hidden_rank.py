"""A rank whose output is filtered away fails; every node prints the same teardown.

``torchrun --local-ranks-filter 0`` (or ``--tee`` of rank 0 only) keeps one rank per node in
the log.  When another rank of a node dies (its DataLoader worker killed), nothing of its
own error is printed: the node's launcher stops its other workers ("Sending process N
closing signal SIGTERM") and only then does the visible rank, cut off from the dead one,
print "Connection closed by peer".  The other nodes print the same lines, but in the
victim's order: their visible rank's "connection closed" first, their launcher's teardown
a second later.

* **Who:** every node printed the same events.  The launcher's teardown is its reaction to
  a worker of its own, not a sign that the node waited on a peer, so the culprit's own
  traceback must not count against it; with nothing else apart, the node whose launcher
  saw its worker fail first is first.  Before, the teardown read as "waited on a peer
  first" on the culprit alone, everything it printed after it weighed as an echo, and it
  was ranked last of three.
"""

from __future__ import annotations

from pathlib import Path

from l4.engine import diagnose
from tests.conftest import write_job

NODES = ("gpu-a0", "gpu-a1", "gpu-a2")
ITERS = 40
DIES_AT = 26


def _iters(upto: int) -> list[str]:
    return [f"[default0]:INFO:train:iter {i}/{ITERS} loss={1.0 / i:.4f} time=95.0ms"
            for i in range(1, upto + 1)]


def _start(host: str, rank: int) -> list[str]:
    return [f"[default0]:INFO:train:[{host}] rank {rank}/9 (local 0) initializing process "
            "group backend=gloo timeout=25s",
            "[default0]:INFO:train:model ready: 1.2M parameters"]


def _teardown(pid: int, sec: float) -> list[str]:
    t = f"08:51:{sec:09.6f}"
    return [f"W1206 {t} {pid} torch/distributed/elastic/multiprocessing/api.py:1028] "
            f"Sending process {pid + 72} closing signal SIGTERM",
            f"W1206 {t} {pid} torch/distributed/elastic/multiprocessing/api.py:1028] "
            f"Sending process {pid + 77} closing signal SIGTERM"]


def _echo(rank: int, port: int) -> list[str]:
    p = f"[default0]:[rank{rank}]: "
    return [p + "Traceback (most recent call last):",
            p + '  File "/job/code/train.py", line 346, in main',
            p + "    loss.backward()",
            p + "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
            f"pair.cc:553] Connection closed by peer [127.0.0.1]:{port}. This is typically "
            "caused by a remote worker crashing. Check the logs of the remote worker."]


def _summary(host: str, pid: int, sec: float, rank: int, local: int) -> list[str]:
    t = f"08:51:{sec + 0.2:09.6f}"
    return [
        f"E1206 {t} {pid} torch/distributed/elastic/multiprocessing/api.py:1002] failed "
        f"(exitcode: 1) local_rank: {local} (pid: {pid + 80}) of binary: /usr/bin/python3",
        "Traceback (most recent call last):",
        '  File "/usr/bin/torchrun", line 8, in <module>',
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "/job/code/train.py FAILED",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2026-12-06_08:51:48",
        f"  host      : {host}",
        f"  rank      : {rank} (local_rank: {local})",
        f"  exitcode  : 1 (pid: {pid + 80})",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "============================================================",
    ]


def _healthy(root: Path) -> Path:
    nodes = {h: "\n".join(_start(h, 3 * i) + _iters(ITERS)
                          + ["[default0]:INFO:train:training done"]) + "\n"
             for i, h in enumerate(NODES)}
    return write_job(root, nodes, status="succeeded")


def _failed(root: Path) -> Path:
    nodes = {}
    for i, host in enumerate(NODES):
        pid, sec = 24618 + i, 48.12 + i
        head = _start(host, 3 * i) + _iters(DIES_AT - 1)
        if i == 0:  # its hidden local rank 2 died: the launcher acts before rank 0 knows
            tail = _teardown(pid, sec) + _echo(0, 19877) + _summary(host, pid, sec, 2, 2)
        else:  # a victim: its visible rank 3i loses the peer, then its launcher tears down
            tail = _echo(3 * i, 44761 + i) + _teardown(pid, sec) + _summary(host, pid, sec, 3 * i, 0)
        nodes[host] = "\n".join(head + tail) + "\n"
    return write_job(root, nodes)


def test_the_node_whose_hidden_rank_failed_is_first(tmp_path: Path) -> None:
    baselines = [_healthy(tmp_path / f"baseline-{k}") for k in range(2)]
    report = diagnose(_failed(tmp_path / "failed"), baselines=baselines, store_path=False)
    ranked = [n["node"] for n in report["nodes"]]
    assert ranked[0] == "gpu-a0", report["nodes"][:3]
    assert report["stage"] == "training"
    assert DIES_AT in [it["iteration"] for it in report["iterations"][:3]]
