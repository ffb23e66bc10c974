"""A warning every node printed, and the healthy runs did not, is no failure indicator.

The failed run used another library version: each of its nodes warns of a deprecation
the healthy runs never saw.  Only the crashed rank's own error sets the culprit apart.
"""

from __future__ import annotations

from conftest import write_job
from l4.engine import diagnose

HOSTS = ("cn01", "cn02", "cn03", "cn04", "cn05")


def node_log(k: int, *, iters: int, warn: bool, crash: bool = False,
             failed: bool = True) -> str:
    out = [f"[2026-12-01 10:00:0{k},000] INFO starting rank {k}"]
    if warn:
        out.append("/opt/conda/lib/python3.10/site-packages/apex/__init__.py:68: "
                   "DeprecationWarning: `apex.transformer` is deprecated and will be removed "
                   "in a future release.")
        out.append("  warnings.warn(")
    for it in range(1, iters + 1):
        out.append(f"[2026-12-01 10:{it // 60 + 1:02d}:{it % 60:02d},000] INFO step {it} "
                   f"loss {3 + 1 / it:.4f}")
    if crash:
        out.append("[2026-12-01 10:01:41,000] ERROR RuntimeError: CUDA error: an illegal "
                   "memory access was encountered")
    elif failed:
        out.append("[2026-12-01 10:11:41,000] ERROR RuntimeError: [Rank 0] Watchdog caught "
                   "collective operation timeout: WorkNCCL(SeqNum=81, OpType=ALLREDUCE) ran "
                   "for 600000 milliseconds before timing out.")
    else:
        out.append("[2026-12-01 10:05:00,000] INFO training finished")
    return "\n".join(out) + "\n"


def test_a_deprecation_every_node_printed_is_not_an_event(tmp_path):
    healthy = write_job(tmp_path / "ok", {h: node_log(k, iters=80, warn=False, failed=False)
                                          for k, h in enumerate(HOSTS)}, status="succeeded")
    nodes = {h: node_log(k, iters=40, warn=True, crash=h == "cn03")
             for k, h in enumerate(HOSTS)}
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy], store_path=False)
    assert report["nodes"][0]["node"] == "cn03"
    templates = [e["template"] for e in report["events"]]
    assert any("illegal memory access" in t for t in templates), templates
    assert not any("Deprecat" in t or "warnings.warn" in t for t in templates), templates


def test_a_warning_only_the_culprit_printed_still_is(tmp_path):
    healthy = write_job(tmp_path / "ok", {h: node_log(k, iters=80, warn=False, failed=False)
                                          for k, h in enumerate(HOSTS)}, status="succeeded")
    nodes = {h: node_log(k, iters=40, warn=h == "cn03", crash=h == "cn03")
             for k, h in enumerate(HOSTS)}
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy], store_path=False)
    templates = [e["template"] for e in report["events"]]
    assert any("DeprecationWarning" in t for t in templates), templates
