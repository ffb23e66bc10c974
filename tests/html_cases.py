"""Jobs for the HTML report tests: a failure whose log lines, file name and job.json try to
inject markup (script, event handler, markdown link, CDATA end, quotes)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import XID79, megatron_node, write_job

SCRIPT = "<script>window.__l4pwned='script'</script>"
IMG = "<img src=x onerror=\"window.__l4pwned='img'\">"
MDLINK = "[click for the fix](javascript:window.__l4pwned='md') ![x](http://example.invalid/x.png)"
CDATA = "]]> \"double\" 'single' & <b>bold</b> ` backtick"
HOSTILE_LINES = (
    XID79,
    f"RuntimeError: CUDA error: unspecified launch failure {SCRIPT}",
    f"Traceback (most recent call last):\n  File \"/opt/train/{IMG}.py\", line 3, in <module>\n"
    f"    step()\nRuntimeError: {IMG}",
    f"NCCL WARN {MDLINK}",
    f"NCCL WARN cuda failure {CDATA}",
)
HOSTILE_NODE = "node-<svg onload=window.__l4pwned=1>"
HOSTILE_JOB_ID = "job\"><script>window.__l4pwned='job'</script>"


def hostile_job(root: Path, *, n_nodes: int = 4, culprit: int = 2, fail_at: int = 41) -> Path:
    """A Megatron-like job (clocked lines) whose culprit logs the hostile lines."""
    nodes = {}
    for r in range(n_nodes):
        name = HOSTILE_NODE if r == culprit else f"node-{r}"
        nodes[name] = megatron_node(
            60, rank=r, prints_iters=True,
            fail_at=fail_at if r == culprit else None,
            fail_lines=HOSTILE_LINES if r == culprit else (),
            victim_from=None if r == culprit else fail_at,
        )
    job = write_job(root, nodes, job_id=HOSTILE_JOB_ID)
    meta = json.loads((job / "job.json").read_text())
    meta["config_id"] = "cfg-<i>x</i>"
    (job / "job.json").write_text(json.dumps(meta))
    return job


def healthy_job(root: Path, seed: int = 1, n_nodes: int = 4) -> Path:
    nodes = {f"node-{r}": megatron_node(60, rank=r, prints_iters=True, seed=seed)
             for r in range(n_nodes)}
    job = write_job(root, nodes, status="succeeded")
    meta = json.loads((job / "job.json").read_text())
    meta["config_id"] = "cfg-<i>x</i>"
    (job / "job.json").write_text(json.dumps(meta))
    return job
