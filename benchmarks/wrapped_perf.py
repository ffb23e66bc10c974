"""Scan cost of logs stored by a container runtime (CRI, Docker json-file) against the same
lines as the program printed them, measured in the same run.

    .venv/bin/python benchmarks/wrapped_perf.py [--nodes 8] [--mb 24] [--workers 1,2]

A wrapped file is unwrapped as it streams (``l4.wrapped``): one regular-expression match
per line and, for Docker, JSON unescaping of lines that hold escapes.  The reference is the
same job's lines written bare, scanned by ``l4.engine.scan_files`` as usual.  Printed:
seconds and MB/s (of the bare lines, so the rows compare like for like) per layout and
worker count, and the ratio to the reference.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "realruns"))

sys.path.insert(0, str(ROOT / "benchmarks"))

from gathered_perf import timed  # noqa: E402
from runtime import records  # noqa: E402

T0 = 1_749_000_000_000_000_000


def _lines(rng: random.Random, rank: int, n: int) -> list[bytes]:
    out = []
    for step in range(1, n + 1):
        out.append(f"[rank{rank}]: step {step}/200000 | loss {rng.uniform(1, 3):.4f} | grad_norm "
                   f"{rng.uniform(0, 2):.3f} | lr 1.0e-05 | tokens/s {rng.randrange(9000, 11000)}".encode())
        if step % 50 == 0:  # a warning with a quoted path, as libraries print them
            out.append(b'/opt/conda/lib/python3.10/site-packages/torch/utils/checkpoint.py:1399: '
                       b'UserWarning: "use_reentrant" should be passed explicitly <see docs>')
    return out


def write_jobs(work: Path, n_nodes: int, mb: float) -> dict[str, Path]:
    """The same lines as printed, in CRI records and in Docker json-file records."""
    rng = random.Random(7)
    per_line = 110
    n = max(1, int(mb * (1 << 20) / per_line / n_nodes))
    jobs = {k: work / k for k in ("bare", "cri", "docker")}
    for j in jobs.values():
        (j / "logs").mkdir(parents=True)
    for k in range(n_nodes):
        lines = _lines(rng, k, n)
        name = f"node-{k:03d}.log"
        (jobs["bare"] / "logs" / name).write_bytes(b"\n".join(lines) + b"\n")
        for kind in ("cri", "docker"):
            (jobs[kind] / "logs" / name).write_bytes(b"".join(
                records(kind, ln + b"\n", "stderr" if b"Warning" in ln else "stdout", T0 + i * 10**7)
                for i, ln in enumerate(lines)))
    return jobs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--mb", type=float, default=24.0, help="MB of bare lines in all")
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args(argv)
    workers = [int(w) for w in args.workers.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        jobs = write_jobs(Path(tmp), args.nodes, args.mb)
        mb = sum(p.stat().st_size for p in (jobs["bare"] / "logs").iterdir()) / (1 << 20)
        print(f"{args.nodes} nodes, {mb:.1f} MB of lines as printed; seconds (MB/s of those lines)")
        for w in workers:
            ref = timed(jobs["bare"], w)
            row = f"  workers={w}: bare {ref:6.2f} s ({mb / ref:5.1f} MB/s)"
            for kind in ("cri", "docker"):
                got = timed(jobs[kind], w)
                row += f"  {kind} {got:6.2f} s ({mb / got:5.1f} MB/s, x{got / ref:4.2f})"
            print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
