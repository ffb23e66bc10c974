"""Numbers that advance in a collective library's log or in an error report count no steps.

Why: a job that died loading its model printed no step, but other numbers advanced in
its log: NCCL's own INFO lines as its communicators were torn down ("NCCL INFO
transport/net.cc:1012 -> 3"), an NCCL warning's byte counts.  Read as an iteration
counter, they made the failure "training, iteration 1" on a clean-room generator's jobs.
(Dropping every unknown line where healthy runs counted with another one was tried: the
simulator's jobs print their own counter line in a wording the healthy runs' template
store keeps apart, and four lost their iterations.)
"""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose
from l4.severity import reports_trouble

NODES = ("kf-w0", "kf-w1", "kf-w2")


def _node(k: int, *, fails: bool, waits: bool = False) -> str:
    out = [f"2025-06-27T21:39:42.{k}55 INFO [train.dist] rank {k} initialized process group",
           f"2025-06-27T21:39:50.{k}95 INFO [train.model] rank {k} loading Llama-3-8B dtype=bfloat16"]
    if waits:  # a peer of the failed node: ready, then stuck in the first collective
        out += [f"2025-06-27T21:40:02.{k}00 INFO [train.model] rank {k} model ready",
                f"2025-06-27T22:10:02.{k}00 ERROR [train.dist] rank {k} torch.distributed.DistBackendError: "
                "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
                "OpType=BROADCAST) ran for 1800000 milliseconds before timing out."]
        return "\n".join(out) + "\n"
    if fails:
        out += [f"kf-w{k}:2851:{2990 + a} [0] NCCL INFO transport/net.cc:{1000 + 3 * a} -> {a}"
                for a in range(1, 9)]
        out += ["Traceback (most recent call last):",
                '  File "/workspace/main.py", line 360, in main',
                "    model = AutoModelForCausalLM.from_pretrained(cfg.model)",
                "OSError: We couldn't connect to 'https://huggingface.co' to load this file"]
        return "\n".join(out) + "\n"
    out.append(f"2025-06-27T21:40:02.{k}00 INFO [train.model] rank {k} model ready")
    out += [f"2025-06-27T21:{41 + s // 60:02d}:{s % 60:02d}.{k}00 INFO [train.loop] step {s} | loss "
            f"{3 - s / 40:.4f} | lr 2.0e-05" for s in range(1, 60)]
    return "\n".join(out) + "\n"


def test_library_chatter_at_start_up_counts_no_steps(tmp_path) -> None:
    base = write_job(tmp_path / "ok", {n: _node(k, fails=False) for k, n in enumerate(NODES)},
                     status="succeeded")
    failed = write_job(tmp_path / "failed", {n: _node(k, fails=k == 1, waits=k != 1)
                                             for k, n in enumerate(NODES)})
    report = diagnose(failed, baselines=[base], store_path=False)
    assert report["nodes"][0]["node"] == "kf-w1"
    assert report["stage"] == "model_loading"
    assert report["iterations"] == []


def test_an_error_report_is_no_counter_line() -> None:
    assert reports_trouble("host:1:2 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion "
                           "from peer 10.0.0.5<47601> with status=12 opcode=0 len=65536 vendor err 129")
    assert reports_trouble("RuntimeError: step 12 failed")
    assert not reports_trouble("step 120 | loss 1.23 | lr 2.0e-05")
    assert not reports_trouble(" iteration      120/   1000 | loss scale: 1.0 | number of nan iterations:   0 |")
