"""A driver that relays its workers' output holds their errors; the worker is the culprit."""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose
from l4.relay import lead_tokens, relays_an_address

IPS = {"head-0": "10.9.0.10", "gpu-1": "10.9.0.11", "gpu-2": "10.9.0.12"}
ERROR = ["Traceback (most recent call last):",
         '  File "/opt/verl/workers/fsdp_workers.py", line 736, in generate_sequences',
         "RuntimeError: CUDA error: an illegal memory access was encountered",
         "CUDA kernel errors might be asynchronously reported at some other API call",
         "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
         "Fatal Python error: Aborted",
         "Thread 0x00007f3588449dde (most recent call first):"]


def worker_log(name: str, steps: int, *, fails: bool = False) -> list[str]:
    out = [f"2025-06-01 08:00:00,000 NCCL INFO Bootstrap : Using eth0:{IPS[name]}<0>"]
    out += [f"2025-06-01 08:{k // 60:02d}:{k % 60:02d},100 step {k} rollout done" for k in range(1, steps)]
    if fails:
        # the worker's own file lost most of its dying output; the driver got all of it
        out += ERROR[-2:]
    return out


def head_log(steps: int, *, relay_from: str | None = None, dead: str | None = None) -> list[str]:
    out = [f"2025-06-01 07:59:58,000 INFO scripts.py:1047 -- Local node IP: {IPS['head-0']}"]
    for k in range(1, steps):
        out.append(f"(TaskRunner pid=4100, ip={IPS['head-0']}) 2025-06-01 08:{k // 60:02d}:{k % 60:02d},200 "
                   f"training step {k}: loss {2 + 1 / k:.4f}")
    if relay_from:
        out += [f"(WorkerDict pid=95336, ip={IPS[relay_from]}) {line}" for line in ERROR]
        out += ["ray.exceptions.RayTaskError(RuntimeError): ray::TaskRunner.run() failed",
                "RuntimeError: CUDA error: an illegal memory access was encountered",
                "2025-06-01 08:01:30,000 ERROR job_supervisor.py:196 -- Job entrypoint command failed with exit code 1"]
    if dead:
        out += [f"(raylet) The node with node id: d44aaf9f49 and address: {IPS[dead]} and node name: "
                f"{IPS[dead]} has been marked dead because the detector has missed too many heartbeats from it.",
                "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
                "2025-06-01 08:01:30,000 ERROR job_supervisor.py:196 -- Job entrypoint command failed with exit code 1"]
    return out


def _job(path, head, workers, **kw):
    logs = {"head-0": "\n".join(head) + "\n"}
    logs.update({n: "\n".join(w) + "\n" for n, w in workers.items()})
    return write_job(path, logs, **kw)


def test_lead_tokens_read_only_the_origin_group():
    ips, words = lead_tokens("(WorkerDict pid=1, ip=10.9.0.11) RuntimeError: x")
    assert ips == ["10.9.0.11"] and "WorkerDict" in words
    assert lead_tokens("gpu-1: [rank 3] loss 2.0") == ([], ["gpu-1"])
    assert lead_tokens("NCCL WARN peer 10.9.0.11 closed") == ([], [])
    assert relays_an_address("(raylet, ip=10.9.0.11) spilled 3 objects")
    assert not relays_an_address("[rank3]: RuntimeError: boom")


def test_the_worker_whose_error_the_driver_relays_comes_first(tmp_path):
    healthy = _job(tmp_path / "ok", head_log(60), {n: worker_log(n, 60) for n in ("gpu-1", "gpu-2")},
                   status="succeeded")
    failed = _job(tmp_path / "failed", head_log(40, relay_from="gpu-2"),
                  {"gpu-1": worker_log("gpu-1", 40), "gpu-2": worker_log("gpu-2", 40, fails=True)})
    report = diagnose(failed, [healthy], store_path=False)
    assert report["nodes"][0]["node"] == "gpu-2", report["nodes"]


def test_a_node_the_driver_marks_dead_is_named_by_its_address(tmp_path):
    healthy = _job(tmp_path / "ok", head_log(60), {n: worker_log(n, 60) for n in ("gpu-1", "gpu-2")},
                   status="succeeded")
    # the dead node's own log simply stops, no error in it
    failed = _job(tmp_path / "failed", head_log(40, dead="gpu-1"),
                  {"gpu-1": worker_log("gpu-1", 40), "gpu-2": worker_log("gpu-2", 40)})
    report = diagnose(failed, [healthy], store_path=False)
    assert report["nodes"][0]["node"] == "gpu-1", report["nodes"]
    assert report["nodes"][0]["evidence"]["named"] == 1.0


def test_a_batch_hosts_report_on_every_node_is_not_its_own_trouble():
    """Slurm's batch host prints "srun: error: cn-d057: tasks 161-167: Aborted" for every
    node whose tasks died: lines about other nodes, one per node.  A node's line that
    names itself, or names the same node each time, is not such a report."""
    import numpy as np

    from l4.relay import reports_on_others

    class Job:
        nodes = ["cn-d037", "cn-d038", "cn-d039", "cn-d040"]
        n_nodes = 4
        templates = ["srun: error: <*>: tasks <*>: Aborted (core dumped)",
                     "RuntimeError: connection to <*> lost"]
        counts = np.array([[4, 0], [0, 3], [0, 0], [0, 0]])
        examples = [{0: (5, "srun: error: cn-d038: tasks 8-15: Aborted (core dumped)", [])},
                    {1: (9, "RuntimeError: connection to cn-d040 lost", [])}, {}, {}]
        last_examples = [{0: "srun: error: cn-d040: tasks 24-31: Aborted (core dumped)"},
                         {1: "RuntimeError: connection to cn-d040 lost"}, {}, {}]

    ids = {name: i for i, name in enumerate(Job.nodes)}
    out = reports_on_others(Job(), ids)
    assert out.tolist() == [[True, False], [False, False], [False, False], [False, False]]
