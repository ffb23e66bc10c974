"""A tool's report is framed by lines that say nothing: they are no events.

Why: a pod that Kubernetes killed ends its log with ``kubectl describe``'s dump, and a
site's epilogue traces its commands with ``set -x``.  Healthy runs print neither, so every
line of them was new on the culprit, and the banner ("==== pod x (namespace y) ===="), the
section heading ("Events:"), the table's header row ("Type  Reason  Age  From  Message")
and the traced command ("+ dmesg -T | grep -iE 'xid|oom'", whose words are the grep's)
were reported as failure indicators beside the one line that says what happened.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import write_job
from l4.engine import diagnose
from l4.severity import is_boilerplate


@pytest.mark.parametrize("template", [
    "==== pod <*> (namespace research) ====",
    "Events:",
    "Type Reason Age From Message",
    "+ dmesg -T | grep -iE 'xid|nvrm|amdgpu|<*>|oom' | tail -n <*>",
])
def test_a_reports_layout_is_boilerplate(template: str) -> None:
    assert is_boilerplate(template)


@pytest.mark.parametrize("template", [
    "Reason: OOMKilled",
    "Status: Failed",
    "RuntimeError: CUDA error: out of memory",
    "Root Cause (first observed failure):",
    "Warning BackOff <*> kubelet Back-off restarting failed container pytorch in pod <*>",
])
def test_what_it_frames_is_not(template: str) -> None:
    assert not is_boilerplate(template)


def _node(rank: int, *, killed: bool) -> str:
    out = [f"2025-02-03 21:13:{rank:02d},000 INFO [train] rank {rank} initialized process group"]
    out += [f"2025-02-03 21:14:{k:02d},000 INFO [train] step {k} loss {2.0 - k / 100:.3f}"
            for k in range(1, 40 if not killed else 20)]
    if killed:
        out += ["+ dmesg -T | grep -iE 'xid|nvrm|oom' | tail -n 20",
                "==== pod train-worker-3 (namespace research) ====",
                "Status:         Failed",
                "    State:          Terminated",
                "      Reason:       OOMKilled",
                "      Exit Code:    137",
                "Events:",
                "  Type     Reason     Age    From               Message",
                "  ----     ------     ----   ----               -------",
                "  Warning  BackOff    2m     kubelet            Back-off restarting failed container"]
    else:
        out.append("2025-02-03 21:16:00,000 ERROR [train] rank timed out waiting for peers")
    return "\n".join(out) + "\n"


def test_the_oom_kill_is_reported_and_its_frame_is_not(tmp_path: Path) -> None:
    healthy = write_job(tmp_path / "ok", {f"w{k}": "\n".join(_node(k, killed=False).splitlines()[:-1]) + "\n"
                                          for k in range(4)}, status="succeeded")
    failed = write_job(tmp_path / "failed", {f"w{k}": _node(k, killed=k == 3) for k in range(4)})
    report = diagnose(failed, [healthy], store_path=False)
    assert report["nodes"][0]["node"] == "w3"
    events = [e["template"] for e in report["events"]]
    assert any("OOMKilled" in t for t in events), events
    for framing in ("Events:", "Type Reason Age From Message", "==== pod", "+ dmesg"):
        assert not any(t.strip().startswith(framing) for t in events), events
