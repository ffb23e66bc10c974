"""The one node whose copy of the job-wide failure line says something else.

After a hang every rank's watchdog reports the collective it gave up on.  The victims all
waited in the same one (SeqNum 171610, ALLREDUCE); the rank they waited for had moved on
to another (BROADCAST, its evaluation loop ended a batch early) and its watchdog says so.
Nothing else tells the nodes apart: same lines, same ends, no names."""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

HOSTS = [f"dgx{177 + k:04d}" for k in range(8)]


def _log(k: int, *, iters: int, op: str | None, skew: float = 0.0, seq: int = 171610) -> str:
    out = [f"2024-04-29 06:{it // 60:02d}:{it % 60:02d} | step {it} | loss {2 + 1 / it:.4f}"
           for it in range(1, iters + 1)]
    if op is None:
        return "\n".join(out) + "\n"
    sec = 47 + skew
    when = f"07:{28 + int(sec // 60):02d}:{sec % 60:09.6f}"
    out += [
        f"[rank{k}]:[E429 {when} ProcessGroupNCCL.cpp:607] [Rank {k}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, NumelOut=1, "
        f"Timeout(ms)=900000) ran for {900000 + 37 * k} milliseconds before timing out.",
        f"[rank{k}]:[E429 {when} ProcessGroupNCCL.cpp:627] [Rank {k}] To avoid data inconsistency, "
        "we are taking the entire process down.",
    ]
    return "\n".join(out) + "\n"


def _diagnose(tmp_path, nodes: dict[str, str]) -> dict:
    healthy = write_job(tmp_path / "ok", {h: _log(k, iters=40, op=None) for k, h in enumerate(HOSTS)},
                        status="succeeded")
    return diagnose(write_job(tmp_path / "failed", nodes), [healthy], store_path=False)


def test_the_node_in_another_collective_comes_first(tmp_path):
    nodes = {h: _log(k, iters=30, op="BROADCAST" if k == 2 else "ALLREDUCE")
             for k, h in enumerate(HOSTS)}
    report = _diagnose(tmp_path, nodes)
    assert report["nodes"][0]["node"] == HOSTS[2], report["nodes"][:3]
    ev = {n["node"]: n["evidence"] for n in report["nodes"]}
    assert ev[HOSTS[2]]["odd_in_symptom"] == 1.0
    assert all(ev[h]["odd_in_symptom"] == 0.0 for h in HOSTS if h != HOSTS[2])


def test_a_clock_a_minute_off_or_two_odd_nodes_single_nobody_out(tmp_path):
    # one node's clock runs 70 s behind: its line reads another minute, which says nothing;
    # two nodes in other collectives are a split, not one culprit
    nodes = {h: _log(k, iters=30, op="BROADCAST" if k in (2, 5) else "ALLREDUCE",
                     skew=-70.0 if k == 6 else 0.0)
             for k, h in enumerate(HOSTS)}
    report = _diagnose(tmp_path, nodes)
    assert all(n["evidence"]["odd_in_symptom"] == 0.0 for n in report["nodes"]), report["nodes"][:3]
