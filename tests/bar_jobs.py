"""A three-node job whose logs a test writes node by node, diagnosed through the CLI.

Shared by the progress-bar tests (``test_carriage_return``, ``test_periodic_counter``):
node 1 crashes, nodes 0 and 2 time out after it, and a healthy run of three nodes is the
baseline.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from l4.cli import app


def diagnose_three_nodes(tmp_path: Path, write: Callable[[Path, bool, str], None]) -> dict:
    """``write(path, failed, role)`` writes one node's log (role: victim, crash or ok);
    returns the JSON report of ``l4 diagnose`` on the failed job with the healthy one."""
    for n, role in enumerate(["victim", "crash", "victim"]):
        write(tmp_path / "failed" / "logs" / f"node-{n}.log", True, role)
    for n in range(3):
        write(tmp_path / "base" / "logs" / f"node-{n}.log", False, "ok")
    res = CliRunner().invoke(app, ["diagnose", str(tmp_path / "failed"), "-b",
                                   str(tmp_path / "base"), "--no-prefect", "--no-kb",
                                   "-f", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def launcher_end(failed: bool, killed_at: str, exited_at: str) -> str:
    """The DeepSpeed launcher's last line: it kills its worker (``failed``) at
    ``killed_at``, or sees it exit successfully at ``exited_at`` ("HH:MM:SS")."""
    if failed:
        return f"[2024-05-02 {killed_at},000] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 4410\n"
    return f"[2024-05-02 {exited_at},000] [INFO] [launch.py:351:main] Process 4410 exits successfully.\n"
