"""Real torchrun runs checked into ``tests/fixtures/realruns/`` and how to unpack one.

Why compressed fixtures: the runs come from ``benchmarks/realruns/make_runs.py`` (real
``torchrun`` jobs with one injected fault); CI must not launch torchrun, so a few of the
development cases are kept as ``<case>.tar.xz``, each holding ``<case>/failed/``,
``<case>/baseline-0/``, ``<case>/baseline-1/`` and ``<case>/truth.json``.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "realruns"


def fixture_names() -> list[str]:
    """Case names of every checked-in real run, e.g. ``["case-0", "case-9"]``."""
    return sorted(p.name.removesuffix(".tar.xz") for p in FIXTURES.glob("*.tar.xz"))


def unpack(name: str, dest: Path) -> tuple[Path, dict]:
    """Extract one fixture under ``dest``; return (case directory, its truth)."""
    with tarfile.open(FIXTURES / f"{name}.tar.xz", "r:xz") as tar:
        tar.extractall(dest, filter="data")
    case = dest / name
    return case, json.loads((case / "truth.json").read_text())


def truth_of(name: str) -> dict:
    """A fixture's truth without unpacking its logs (used to choose tests at collection)."""
    with tarfile.open(FIXTURES / f"{name}.tar.xz", "r:xz") as tar:
        fh = tar.extractfile(f"{name}/truth.json")
        assert fh is not None
        return json.loads(fh.read())
