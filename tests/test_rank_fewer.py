"""A rank that never entered the collective logs no timeout: its node reports one rank
fewer than every other node.  And a node whose clock runs behind is no first stopper:
the lines every node printed in step show its offset."""

from __future__ import annotations

import numpy as np

from conftest import write_job
from l4.engine import diagnose
from l4.spatial import short_of_pack

HOSTS = ("gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5")
RANKS = 4


def _stamp(sec: float) -> str:
    sec += 1000.0  # a clock behind stays on the same day
    s, us = int(sec), int(round((sec % 1) * 1e6))
    return f"{10 + s // 3600:02d}:{(s // 60) % 60:02d}:{s % 60:02d}.{us:06d}"


def node_log(k: int, *, iters: int, hung: int | None = None, skew: float = 0.0,
             healthy: bool = False, late_start: float = 0.0) -> str:
    """One node of ``RANKS`` ranks; ``hung``: a local rank that stopped entering
    collectives (it logs no timeout); ``skew``: seconds this host's clock is off;
    ``late_start``: seconds its launcher started after the others (its start-up lines
    only are late: the first collective waits for it)."""
    t0 = skew + late_start
    out = [f"I1201 {_stamp(t0)} 70 api.py:512] Rendezvous complete for workers",
           f"I1201 {_stamp(t0 + 0.5)} 70 api.py:530] Starting worker group"]
    for it in range(1, iters + 1):
        t = skew + 2.0 * it
        out.append(f"[default0]:I1201 {_stamp(t)} 77 train.py:88] step {it} loss {3 + 1 / it:.4f}")
    if healthy:
        out.append(f"I1201 {_stamp(skew + 2.0 * iters + 5)} 70 api.py:900] worker group finished")
        return "\n".join(out) + "\n"
    t = skew + 2.0 * iters + 600.0
    for lr in range(RANKS):
        if lr == hung:
            continue
        g = k * RANKS + lr
        out.append(f"[default{lr}]:[rank{g}]:[E1201 {_stamp(t + 0.01 * lr)} ProcessGroupNCCL.cpp:616] "
                   f"[Rank {g}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum="
                   f"{4 * iters + 1}, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600042 "
                   "milliseconds before timing out.")
        out.append(f"[default{lr}]:[rank{g}]:[E1201 {_stamp(t + 0.02 * lr)} ProcessGroupNCCL.cpp:630] "
                   f"[Rank {g}] To avoid data inconsistency, we are taking the entire process down.")
    out.append(f"E1201 {_stamp(t + 1.0)} 70 api.py:869] failed (exitcode: -6) local_rank: 0 "
               f"(pid: {900 + k}) of binary: /usr/bin/python3")
    return "\n".join(out) + "\n"


def test_the_node_one_rank_short_of_the_pack_s_timeouts_is_the_culprit(tmp_path):
    healthy = write_job(tmp_path / "ok", {h: node_log(k, iters=60, healthy=True)
                                          for k, h in enumerate(HOSTS)}, status="succeeded")
    nodes = {h: node_log(k, iters=50, hung=3 if h == "gpu-2" else None,
                         skew=-25.0 if h == "gpu-0" else 0.0)
             for k, h in enumerate(HOSTS)}
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy], store_path=False)
    ranked = [n["node"] for n in report["nodes"]]
    assert ranked[0] == "gpu-2", ranked
    ev = {n["node"]: n["evidence"] for n in report["nodes"]}
    assert ev["gpu-2"]["missing_symptom"] > 0
    assert all(e["missing_symptom"] == 0 for h, e in ev.items() if h != "gpu-2")
    # gpu-0's log ends 25 s early by its own clock only: its start-up lines are 25 s early too
    assert ev["gpu-0"]["first_to_stop"] == 0.0 and ev["gpu-0"]["stopped_first"] == 0.0


def test_short_of_pack_needs_a_pack_that_agrees():
    even = np.array([[8], [8], [7], [8], [8]])
    assert short_of_pack(even)[:, 0].tolist() == [0, 0, 1, 0, 0]
    # teardown cut ranks short here and there: counts that vary anyway single nobody out
    ragged = np.array([[8], [5], [3], [8], [6]])
    assert not short_of_pack(ragged).any()
    # a node that logged none is "absent", not short; too few nodes tell nothing
    assert not short_of_pack(np.array([[8], [0], [8], [8]])).any()
    assert not short_of_pack(np.array([[8], [7], [8]])).any()


def test_a_node_that_started_late_is_not_made_a_first_stopper(tmp_path):
    """Its start-up lines came 20 s after the others', its later lines on time: that is a
    late start, not a clock ahead, and no correction may lend it a lead."""
    healthy = write_job(tmp_path / "ok", {h: node_log(k, iters=60, healthy=True)
                                          for k, h in enumerate(HOSTS)}, status="succeeded")
    nodes = {h: node_log(k, iters=50, hung=3 if h == "gpu-2" else None,
                         late_start=20.0 if h == "gpu-5" else 0.0)
             for k, h in enumerate(HOSTS)}
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy], store_path=False)
    ev = {n["node"]: n["evidence"] for n in report["nodes"]}
    assert report["nodes"][0]["node"] == "gpu-2", [n["node"] for n in report["nodes"]]
    assert ev["gpu-5"]["first_to_stop"] == 0.0 and ev["gpu-5"]["stopped_first"] == 0.0
