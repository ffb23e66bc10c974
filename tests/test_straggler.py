"""A slow node prints no error: its own timers give it away."""

from __future__ import annotations

import random

from conftest import write_job
from l4.engine import diagnose


def _timers_job(root, *, n_nodes: int = 8, slow: int | None = None, slow_from: int = 40,
                n_iters: int = 80, seed: int = 0):
    rng = random.Random(seed)
    nodes = {}
    for r in range(n_nodes):
        out = [f"2024-05-01 12:00:00,000 [INFO] [launch.py:152:main] nnodes={n_nodes}, node_rank={r}",
               # start-up figures vary from node to node for no reason: not a straggler
               f"Map (num_proc=16): 100%|##########| 6264624/6264624 [00:23<00:00, "
               f"{rng.choice((700.0, 2700.0, 2800.0, 2900.0)) + rng.random():.2f} examples/s]"]
        clock = 0.0
        for it in range(1, n_iters + 1):
            factor = 6.0 if slow is not None and it >= slow_from else 1.0
            clock += 2.0 * factor
            fwd = 600 * (factor if r == slow else 1.0) * rng.uniform(0.97, 1.03)
            wait = (2 + 20 * rng.random()) if r == slow else max(1.0, 2000 * factor - 1800)
            stamp = f"2024-05-01 12:{int(clock) // 60 % 60:02d}:{int(clock) % 60:02d},000"
            out.append(f"{stamp} [INFO] [logging.py:96:log_dist] [Rank {r * 8}] time (ms) | "
                       f"fwd_microstep: {fwd:.2f} | bwd_allreduce_microstep: {wait:.2f}")
            if r == 0:
                out.append(f"{stamp} [INFO] [logging.py:96:log_dist] [Rank 0] step={it}, "
                           f"skipped=0, lr=[1e-4]")
        if slow is not None:
            out.append(f"slurmstepd: error: *** STEP 99.0 ON node-{r} CANCELLED AT "
                       "2024-05-01T13:00:00 DUE TO TIME LIMIT ***")
        nodes[f"node-{r}"] = "\n".join(out) + "\n"
    return write_job(root, nodes, status="failed" if slow is not None else "succeeded",
                     framework="deepspeed")


def test_the_node_whose_timers_disagree_with_everyone_is_the_straggler(tmp_path):
    failed = _timers_job(tmp_path / "failed", slow=5)
    bases = [_timers_job(tmp_path / f"b{i}", seed=i + 1) for i in range(2)]
    report = diagnose(failed, bases)
    assert report["nodes"][0]["node"] == "node-5"
    assert report["stage"] == "training"
    assert 40 in [it["iteration"] for it in report["iterations"][:3]]
    # its timers are what shows it: the line is an event, shown as the straggler printed it
    timer = [e for e in report["events"] if "fwd_microstep" in e["template"]]
    assert timer and timer[0]["nodes"] == ["node-5"], [e["template"] for e in report["events"]]
    example = timer[0]["examples"][0]
    assert example["node"] == "node-5" and "[Rank 40]" in example["text"]
    assert float(example["text"].split("fwd_microstep: ")[1].split()[0]) > 3000
    lines = (failed / example["file"]).read_text().splitlines()
    assert lines[example["line"] - 1] == example["text"]


def test_healthy_spread_between_nodes_names_nobody(tmp_path):
    from l4 import spatial
    from l4.engine import parse_job, scan_files
    from l4.ingest import discover
    from l4.templates import TemplateStore

    spec = discover(_timers_job(tmp_path / "ok", seed=3))
    job = parse_job(spec, scan_files(spec.files), TemplateStore(None))
    assert not spatial.odd_measurements(job).any()


def _data_time_job(root, low: float):
    """Sixteen nodes print one step line each step; the data-loading time varies fourfold
    from node to node (2 to 9 ms), one node's is ``low`` ms."""
    nodes = {}
    for r in range(16):
        data = low if r == 8 else 2.0 + (r % 8) * 0.95
        out = [f"[rank{8 * r}]:[host node-{r}] step {it} | fwd+bwd 5694.5 ms | data {data:.1f} ms"
               for it in range(10, 210, 10)]
        nodes[f"node-{r}"] = "\n".join(out) + "\n"
    return write_job(root, nodes, status="succeeded")


def test_a_value_inside_the_nodes_own_spread_is_no_outlier(tmp_path):
    """0.8 ms against a median of 5 ms is six times off, but the nodes' values already span
    2 to 9 ms: the nearest other is 2 ms, so it stands apart from no one.  A value three
    times off the nearest other does."""
    from l4 import spatial
    from l4.engine import parse_job, scan_files
    from l4.ingest import discover
    from l4.templates import TemplateStore

    def odd(low: float) -> list[str]:
        spec = discover(_data_time_job(tmp_path / f"j{low}", low))
        job = parse_job(spec, scan_files(spec.files), TemplateStore(None))
        return [job.nodes[i] for i in range(job.n_nodes) if spatial.odd_measurements(job)[i] > 0]

    assert odd(0.8) == []
    assert odd(0.3) == ["node-8"]
