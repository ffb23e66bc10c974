"""Who stopped first (a launcher that reacted seconds before a pack that stopped together)
and who slowed first (by the step times the lines print when they carry no clock)."""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

HOSTS = ("dgx-0", "dgx-1", "dgx-2", "dgx-3")


def torchrun_log(host: str, k: int, *, iters: int, end: float | None = None,
                 local_error: bool = False, peer_error: bool = True) -> str:
    """A torchrun node showing only its first rank; ``end``: second at which its launcher
    stops the workers (``None``: a healthy run)."""
    out = [f"I0301 10:00:00.{k:06d} 100 torch/distributed/run.py:800] Starting elastic agent on {host}"]
    for it in range(1, iters + 1):
        out.append(f"[default0]:iteration {it}/ 100 | loss {2 + 1 / it:.4f} | time (ms): 120.5")
    if end is None:
        out.append(f"I0301 10:01:00.{k:06d} 100 torch/distributed/elastic/agent/server/api.py:900] "
                   "Local worker group finished (WorkerState.SUCCEEDED)")
        return "\n".join(out) + "\n"
    if peer_error:
        out.append("[default0]:[rank0]: RuntimeError: Connection closed by peer [127.0.0.1]:4711")
    sec, frac = int(end), int(round((end % 1) * 1e6))
    stamp = f"W0301 10:00:{sec:02d}.{frac:06d} 100 torch/distributed/elastic/multiprocessing/api.py:1028]"
    out.append(f"{stamp} Sending process {4000 + k} closing signal SIGTERM")
    local = 1 if local_error else 0
    out.append(f"E0301 10:00:{sec:02d}.{frac:06d} 100 torch/distributed/elastic/multiprocessing/api.py:1002] "
               f"failed (exitcode: 1) local_rank: {local} (pid: {4100 + k}) of binary: /usr/bin/python")
    return "\n".join(out) + "\n"


def test_the_launcher_that_reacted_first_is_the_culprit(tmp_path):
    """A DataLoader worker died on a rank whose output the launcher does not show: its node
    says nothing of the cause, but its launcher stopped the workers 3 s before the others,
    which stopped within 0.1 s of each other.  A node that merely lacks the pack's errors
    is not the culprit."""
    healthy = write_job(tmp_path / "ok", {h: torchrun_log(h, k, iters=40)
                                          for k, h in enumerate(HOSTS)}, status="succeeded")
    nodes = {
        "dgx-0": torchrun_log("dgx-0", 0, iters=38, end=41.20, peer_error=False),
        "dgx-1": torchrun_log("dgx-1", 1, iters=38, end=44.25),
        "dgx-2": torchrun_log("dgx-2", 2, iters=38, end=44.28, local_error=True),
        "dgx-3": torchrun_log("dgx-3", 3, iters=38, end=44.31, peer_error=False),
    }
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy], store_path=False)
    top = report["nodes"][0]
    assert top["node"] == "dgx-0"
    assert top["evidence"]["first_to_stop"] == 1.0
    assert all(n["evidence"]["first_to_stop"] == 0.0 for n in report["nodes"][1:])


def test_a_pack_that_did_not_stop_together_singles_nobody_out(tmp_path):
    """Skewed clocks: ends spread over seconds, so a lead of 3 s is no lead."""
    healthy = write_job(tmp_path / "ok", {h: torchrun_log(h, k, iters=40)
                                          for k, h in enumerate(HOSTS)}, status="succeeded")
    ends = {"dgx-0": 41.0, "dgx-1": 44.0, "dgx-2": 47.5, "dgx-3": 50.0}
    nodes = {h: torchrun_log(h, k, iters=38, end=ends[h]) for k, h in enumerate(HOSTS)}
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy], store_path=False)
    assert all(n["evidence"]["first_to_stop"] == 0.0 for n in report["nodes"])


def clockless_log(node: int, *, iters: int, slow_from: int | None, straggler: bool) -> str:
    """Two ranks of a node printing "iter N/60 ... time=..ms" with no clock, in either
    order.  From ``slow_from`` every step takes 1.5 s; the straggler's own rank is slow one
    step before (its peers wait for it at the next collective)."""
    out = []
    for it in range(1, iters + 1):
        ranks = (1, 0) if (it + node) % 2 else (0, 1)
        for r in ranks:
            slow = slow_from is not None and (it > slow_from or (it == slow_from and straggler
                                                                   and r == 1))
            ms = 1565.0 + 7 * r if slow else 70.0 + 3 * r + it % 5
            out.append(f"[default{r}]:INFO:train:iter {it}/60 loss={2 + 1 / it:.4f} "
                       f"lr=1.00e-02 time={ms:.1f}ms")
    out.append("torch.distributed.elastic.multiprocessing.api.SignalException: Process 14 got signal: 15")
    return "\n".join(out) + "\n"


def test_a_straggler_is_found_by_the_step_times_its_lines_print(tmp_path):
    """No line carries a clock; the iteration lines of two ranks interleave; the job hit
    its time limit.  The step durations the lines print show the straggler's rank slow at
    step 12, everyone else's at 13."""
    healthy = write_job(tmp_path / "ok", {f"n{k}": clockless_log(k, iters=40, slow_from=None,
                                                                 straggler=False)
                                          for k in range(4)}, status="succeeded")
    nodes = {f"n{k}": clockless_log(k, iters=30, slow_from=12, straggler=k == 2) for k in range(4)}
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy], store_path=False)
    assert report["nodes"][0]["node"] == "n2"
    assert report["nodes"][0]["evidence"]["slowed_first"] == 1.0
    assert 12 in [it["iteration"] for it in report["iterations"][:3]]


def test_nodes_the_evidence_cannot_tell_apart_are_ordered_by_who_stopped_first(tmp_path):
    """Every node printed the same teardown (the rank that died is one the launcher's
    filter hides; peers died of the broken connection), and the ends are too spread for a
    clear lead: of the equals, the node whose launcher stopped first comes first, not the
    one whose name sorts first."""
    healthy = write_job(tmp_path / "ok", {h: torchrun_log(h, k, iters=40)
                                          for k, h in enumerate(HOSTS)}, status="succeeded")
    ends = {"dgx-0": 44.3, "dgx-1": 42.3, "dgx-2": 41.2, "dgx-3": 45.2}
    nodes = {h: torchrun_log(h, k, iters=38, end=ends[h], peer_error=False, local_error=True)
             for k, h in enumerate(HOSTS)}
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy], store_path=False)
    assert all(n["evidence"]["first_to_stop"] == 0.0 for n in report["nodes"])
    scores = {n["node"]: n["score"] for n in report["nodes"]}
    assert len(set(scores.values())) == 1, scores  # equals by every other measure
    assert [n["node"] for n in report["nodes"]] == ["dgx-2", "dgx-1", "dgx-0", "dgx-3"]


def _hang_log(host: str, *, skew: float, culprit: bool, healthy: bool = False) -> str:
    """A node of a job whose culprit's GPU hung: no clock on the step lines, no line every
    node shares; each waiting rank's watchdog gives up on collective 3506 after 1800 s,
    as its own clock (``skew`` seconds off) reads it."""
    out = [f"[rank0]: step {it} loss {2 + 1 / it:.4f}" for it in range(1, 40)]
    if healthy:
        return "\n".join(out) + "\n"
    base = 3 * 3600 + 13 * 60 + 17.0 + skew  # when collective 3506 began, on this clock
    def stamp(t: float) -> str:
        h, m, sec = int(t // 3600), int(t % 3600 // 60), t % 60
        return f"{h:02d}:{m:02d}:{sec:09.6f}"
    if not culprit:
        for lr in range(2):
            ran = 1800000 + 250 * lr
            out.append(f"[rank{lr}]:[E1014 {stamp(base + ran / 1000)}000 ProcessGroupNCCL.cpp:607] [Rank {lr}] "
                       f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3506, OpType=ALLREDUCE, "
                       f"NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for {ran} milliseconds before timing out.")
    end = base + 1800.0 + (25.0 if culprit else 1.0)  # Slurm cancels the step some seconds later
    day = f"2024-10-14T{stamp(end)[:8]}"
    out.append(f"slurmstepd: error: *** STEP 6511391.0 ON {host} CANCELLED AT {day} ***")
    return "\n".join(out) + "\n"


def test_watchdogs_that_gave_up_on_one_collective_set_the_clocks(tmp_path):
    """A victim whose clock runs 24 s behind ends 'first'; the collective its watchdog gave
    up on began when everyone else's did, which shows the clock, not a lead."""
    skews = {"dgx-0": 0.0, "dgx-1": -24.0, "dgx-2": 0.0, "dgx-3": 0.4, "dgx-4": -0.3}
    culprit = "dgx-2"
    failed = write_job(tmp_path / "failed", {h: _hang_log(h, skew=s, culprit=h == culprit)
                                             for h, s in skews.items()})
    healthy = write_job(tmp_path / "ok", {h: _hang_log(h, skew=0, culprit=False, healthy=True)
                                          for h in skews}, status="succeeded")
    report = diagnose(failed, [healthy], store_path=False)
    assert report["nodes"][0]["node"] == culprit, report["nodes"][:3]


def _plain_log(host: str, iters: int, tail: list[str]) -> str:
    """A node's log without any clock: its counter lines, then ``tail``."""
    out = [f"Starting training on {host}"]
    out += [f"[Epoch 1][Batch {it}] loss: {2 + 1 / it:.4f}, lr: 0.010000" for it in range(1, iters + 1)]
    return "\n".join(out + tail) + "\n"


def test_the_node_whose_counter_stopped_short_is_the_culprit(tmp_path):
    """A node lost its power at step 33: its log just ends after step 32.  Its peers
    finished step 33, then broke in the next collective; one of them also lost the
    rendezvous store, an error of its own that no other node has.  No line carries a
    clock, so nothing says who stopped first but the counter: step-locked training cannot
    run ahead of a rank that stopped, so the one node behind every other is the culprit,
    not the loudest peer."""
    healthy = write_job(tmp_path / "ok", {h: _plain_log(h, 60, ["Training finished."]) for h in HOSTS},
                        status="succeeded")
    broken = ["RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:1436.",
              "Training failed."]
    logs = {
        "dgx-0": _plain_log("dgx-0", 33, broken),
        "dgx-1": _plain_log("dgx-1", 33, broken),
        "dgx-2": _plain_log("dgx-2", 32, []),
        "dgx-3": _plain_log("dgx-3", 33, broken + [
            "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to "
            "the C10d store has failed. See inner exception for details."]),
    }
    failed = write_job(tmp_path / "failed", logs)
    report = diagnose(failed, baselines=[healthy], store_path=False)
    first = report["nodes"][0]
    assert first["node"] == "dgx-2", report["nodes"][:2]
    assert first["evidence"]["stopped_counting_first"] == 1.0
    assert all(n["evidence"]["stopped_counting_first"] == 0.0 for n in report["nodes"][1:])


def _mpirun_log(k: int, *, steps: int, timeouts: int, failed: bool, launcher: bool) -> str:
    """Node ``k`` of four, four ranks each, under mpirun (``[1,rank]<stdout>:`` prefixes)."""
    out = []
    for it in range(1, steps + 1):
        out.append(f"[1,{4 * k}]<stdout>:step {it} | loss {2 + 1 / it:.4f} | time (ms): 812.0")
    if not failed:
        out.append(f"[1,{4 * k}]<stdout>:training done")
        return "\n".join(out) + "\n"
    out.append(f"[1,{4 * k}]<stdout>:saving checkpoint at step {steps}")
    for r in range(4 * k, 4 * k + timeouts):
        out.append(f"[1,{r}]<stdout>:[E ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
                   "operation timeout: WorkNCCL(SeqNum=4121, OpType=ALLGATHER, NumelIn=1, "
                   "Timeout(ms)=600000) ran for 600031 milliseconds before timing out.")
    if launcher:
        out.append("mpirun noticed that process rank 0 with PID 4242 on node mpi-0 exited on signal 6 (Aborted).")
    return "\n".join(out) + "\n"


def test_the_first_rank_to_exit_on_its_own_timeout_is_no_culprit(tmp_path):
    """A save hung on one rank of mpi-2: the other ranks of every node time out, and
    mpirun reports rank 0 (on mpi-0) as the first process to exit.  Rank 0 exited because
    its own watchdog fired, as every waiting rank's did: being first says nothing.  The
    node one timeout short of the others (its hung rank never reached the collective) is
    the culprit."""
    names = [f"mpi-{k}" for k in range(4)]
    healthy = write_job(tmp_path / "ok", {n: _mpirun_log(k, steps=60, timeouts=0, failed=False, launcher=False)
                                          for k, n in enumerate(names)}, status="succeeded")
    failed = write_job(tmp_path / "failed", {
        n: _mpirun_log(k, steps=40, timeouts=3 if k == 2 else 4, failed=True, launcher=k == 0)
        for k, n in enumerate(names)})
    report = diagnose(failed, baselines=[healthy], store_path=False)
    assert report["nodes"][0]["node"] == "mpi-2", report["nodes"][:2]
    assert all(n["evidence"]["first_to_stop"] == 0.0 for n in report["nodes"])
