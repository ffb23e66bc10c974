"""Who stopped first: a launcher that reacted seconds before a pack that stopped together."""

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
