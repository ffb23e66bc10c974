"""Jobs of the clean-room generators (``benchmarks/foreign*``), made in a test and diagnosed
through the CLI as a user runs it.

Why generate rather than check in: the generators are deterministic, a job is made in
under a second, and a development seed names the exact job a test is about.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from l4.cli import app

ROOT = Path(__file__).resolve().parents[1]


def generate(generator: str, seed: int, out: Path) -> tuple[Path, dict]:
    """Make ``case-<seed>`` of ``benchmarks/<generator>`` under ``out``; (case dir, truth)."""
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / generator / "gen.py"), "--out", str(out),
                    "--seeds", f"{seed}..{seed}"], check=True, capture_output=True)
    case = out / f"case-{seed}"
    return case, json.loads((case / "truth.json").read_text())


def diagnose(case: Path, truth: dict) -> dict:
    """``l4 diagnose`` of the case's failed job against its baselines, as JSON (no Prefect,
    no knowledge base; templates wherever ``L4_TEMPLATES`` points)."""
    args = ["diagnose", str(case / "failed"), "--no-prefect", "--no-kb", "-f", "json"]
    for b in truth["baselines"]:
        args += ["-b", str(case / b)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)
