"""A culprit that prints no counter line places its trouble by a count of its own.

Rank 0's node prints the job's counter ("iteration 2440/5000 | lm loss ..."); every node
also prints a heartbeat with the same count in other words ("heartbeat rank=2 it=2440
step_time=0.98s").  Node 1's InfiniBand port starts flapping during step 2431-2440 and
flaps now and then until the link fails for good at step 2505.  The flapping's first interval
is where the fault began; the counter has no track on node 1, so before, only the
failure's interval was answered.
"""

from __future__ import annotations

from pathlib import Path

from tests.bar_jobs import diagnose_three_nodes

EVERY = 10
STEPS = 3000
FLAPS = (2433, 2436, 2443, 2455, 2458, 2467, 2475, 2478)  # port error / active, from step 2433
FAIL_AT = 2505
START = 1000


def _ts(step: float) -> str:
    t = int(step)  # one second a step
    return f"2025-03-24 {10 + t // 3600:02d}:{(t // 60) % 60:02d}:{t % 60:02d}"


def _write(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    node = int(path.stem.split("-")[1])
    last = FAIL_AT - 1 if failed else STEPS
    with path.open("w") as fh:
        fh.write(f"{_ts(0)} INFO train: world size 6, 2 ranks per node\n")
        for n in range(START, last + 1):
            if failed and role == "crash" and n in FLAPS:
                fh.write(f"node-1:438062:438269 [1] NCCL WARN NET/IB : mlx5_3:1 Got async event : "
                         f"port {'error' if FLAPS.index(n) % 2 == 0 else 'active'}\n")
            if n % EVERY:
                continue
            if node == 0:
                fh.write(f"{_ts(n)} INFO train: iteration {n}/{STEPS} | lm loss 2.31 | "
                         f"grad norm 1.02 | elapsed time per iteration (ms): 1000.0\n")
            fh.write(f"heartbeat rank={2 * node} it={n} step_time=0.98s\n")
        if not failed:
            fh.write(f"{_ts(STEPS + 5)} INFO train: training finished\n")
            return
        if role == "crash":
            fh.write("node-1:438062:438303 [1] NCCL WARN NET/IB : Got completion from peer "
                     "10.0.86.191<31016> with status=12 opcode=0 len=0 vendor err 129 (Send)\n")
            fh.write("RuntimeError: NCCL communicator was aborted on rank 2. Original reason for "
                     "failure was: NCCL error: remote process exited or there was a network error\n")
        else:
            fh.write(f"{_ts(FAIL_AT + 600)} ERROR train: [Rank {2 * node}] Watchdog caught collective "
                     "operation timeout: WorkNCCL(SeqNum=99449, OpType=ALLREDUCE) ran for 600000 "
                     "milliseconds before timing out.\n")


def test_the_flapping_link_began_where_its_node_counted_the_first_port_error(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _write)
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    its = [i["iteration"] for i in rep["iterations"]]
    assert its[0] == 2440, its  # the interval the first port error came in
    assert 2510 in its[:3], its  # the failure's own interval stays in the first three
