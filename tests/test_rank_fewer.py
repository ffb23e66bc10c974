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
             healthy: bool = False, late_start: float = 0.0, startup: bool = True) -> str:
    """One node of ``RANKS`` ranks; ``hung``: a local rank that stopped entering
    collectives (it logs no timeout); ``skew``: seconds this host's clock is off;
    ``late_start``: seconds its launcher started after the others (its start-up lines
    only are late: the first collective waits for it); ``startup``: whether it logs its
    start-up lines (a log kept from the middle of a run has none)."""
    t0 = skew + late_start
    out = [f"I1201 {_stamp(t0)} 70 api.py:512] Rendezvous complete for workers",
           f"I1201 {_stamp(t0 + 0.5)} 70 api.py:530] Starting worker group"] if startup else []
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


def test_steps_every_node_printed_together_show_a_clock_behind(tmp_path):
    """No start-up line is shared (the logs begin mid-run), but every node printed each
    step at one moment: gpu-0's steps 25 s early show its clock, not an early stop."""
    healthy = write_job(tmp_path / "ok", {h: node_log(k, iters=60, healthy=True, startup=False)
                                          for k, h in enumerate(HOSTS)}, status="succeeded")
    nodes = {h: node_log(k, iters=50, hung=3 if h == "gpu-2" else None, startup=False,
                         skew=-25.0 if h == "gpu-0" else 0.0)
             for k, h in enumerate(HOSTS)}
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy], store_path=False)
    ev = {n["node"]: n["evidence"] for n in report["nodes"]}
    assert report["nodes"][0]["node"] == "gpu-2", [n["node"] for n in report["nodes"]]
    assert ev["gpu-0"]["first_to_stop"] == 0.0 and ev["gpu-0"]["stopped_first"] == 0.0


def test_a_lead_within_a_whole_second_pack_s_spread_is_no_first_stop():
    """Launchers print whole seconds: four of seven peers ending in one second make the
    median deviation 0, though the pack spans four seconds; 1.8 s ahead of it is noise.
    A pack that really ended together still singles out the node that ended before it."""
    from l4.spatial import first_to_stop

    ragged = np.array([5106.4, 5108.2, 5109.2, 5109.2, 5109.2, 5109.2, 5110.2, 5112.2])
    assert not first_to_stop(None, ragged).any()
    together = np.array([100.0, 104.0, 104.0, 104.0])
    assert first_to_stop(None, together).tolist() == [1.0, 0.0, 0.0, 0.0]
    # a pack that stopped within milliseconds, but for one launcher that lost the
    # rendezvous store a second later: the node 2 s ahead of it still stopped first
    store = np.array([0.0, 2.074, 3.076, 2.054])
    assert first_to_stop(None, store).tolist() == [1.0, 0.0, 0.0, 0.0]


def _startup_failure_log(k: int, *, culprit: bool, skew: float) -> str:
    """A node of a job that never got past its process group's set-up: the launcher's
    banner (the one line every node shares), then the connect error."""
    out = [f"W1201 {_stamp(skew)} 70 torch/distributed/run.py:793] Setting OMP_NUM_THREADS "
           "environment variable for each process to be 1 in default"]
    if culprit:
        out.append(f"[E1201 {_stamp(skew + 13.0)} socket.cpp:412] socket bind ip[192.168.0.211] "
                   "port[60000] failed, errno[99]")
        end = skew + 1232.0
    else:
        end = skew + 1240.0
    out.append(f"[E1201 {_stamp(end - 2.0)} ProcessGroup.cpp:64] Getting socket times out after "
               "1200 s while connecting to the remote rank")
    out.append(f"E1201 {_stamp(end)} 70 api.py:869] failed (exitcode: 1) local_rank: 0 "
               f"(pid: {900 + k}) of binary: /usr/bin/python3")
    return "\n".join(out) + "\n"


def test_one_shared_start_up_line_is_enough_to_read_a_clock_behind(tmp_path):
    """A job that failed at start-up shares one line, the launcher's banner.  gpu-0 printed
    it 20 s early and stopped 20 s early: it ran as long as every peer, so it is no first
    stopper, and gpu-3, which stopped 8 s before the pack, is."""
    nodes = {h: _startup_failure_log(k, culprit=h == "gpu-3", skew=-20.0 if h == "gpu-0" else 0.0)
             for k, h in enumerate(HOSTS)}
    banner = _startup_failure_log(0, culprit=False, skew=0.0).splitlines()[0] + "\n"
    healthy = write_job(tmp_path / "ok", {h: banner + node_log(k, iters=60, healthy=True)
                                          for k, h in enumerate(HOSTS)}, status="succeeded")
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy], store_path=False)
    ev = {n["node"]: n["evidence"] for n in report["nodes"]}
    assert report["nodes"][0]["node"] == "gpu-3", [n["node"] for n in report["nodes"]]
    assert ev["gpu-0"]["first_to_stop"] == 0.0 and ev["gpu-0"]["stopped_first"] == 0.0
