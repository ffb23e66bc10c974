"""Scan cost of a gathered log (one file holding every node's tagged lines) against the same
lines written one file per node, measured in the same run.

    .venv/bin/python benchmarks/gathered_perf.py [--nodes 16] [--mb 12] [--workers 1,2]

mpirun on SageMaker writes every rank's lines, each behind ``[1,mpirank:R,host]<stdout>:``,
into the first host's log; ``l4.gather`` splits that file by origin while scanning, one
pass per node it names (a pass skips, in C, every block where the node printed nothing).
The reference is the same job with each node's lines in its own file (no tags), scanned
by ``l4.engine.scan_files`` as usual.  Two shapes of gathered job are measured:

* ``every rank prints``: each node prints as many lines as the others all the way through
  (the worst case for the per-node passes: every block names every node);
* ``rank 0 reports``: Hugging Face's Trainer, where only the first rank prints while the
  job trains and the others print their start-up and their end.

Printed: seconds and MB/s per layout and worker count, and the ratio to the reference.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from l4.engine import scan_files  # noqa: E402
from l4.ingest import discover  # noqa: E402


def _line(rng: random.Random, rank: int, step: int) -> str:
    return (f"[2025-06-03 16:{step // 3600 % 60:02d}:{step % 60:02d},{rng.randrange(1000):03d}] "
            f"[rank{rank}] step {step}/200000 loss {rng.uniform(1, 3):.4f} grad_norm "
            f"{rng.uniform(0, 2):.3f} lr 1.0e-05 tokens/s {rng.randrange(9000, 11000)}")


def write_jobs(work: Path, n_nodes: int, mb: float, *, rank0_only: bool) -> tuple[Path, Path]:
    """(one file per node, one gatherer) holding the same lines."""
    rng = random.Random(7)
    hosts = [f"algo-{k}" for k in range(1, n_nodes + 1)]
    plain, gathered = work / "plain" / "logs", work / "gathered" / "logs"
    plain.mkdir(parents=True)
    gathered.mkdir(parents=True)
    budget = int(mb * (1 << 20))
    per_node = {h: [] for h in hosts}
    out = []
    size, step = 0, 0
    while size < budget:
        step += 1
        for k, h in enumerate(hosts):
            if rank0_only and k and 50 < step and size < budget - (1 << 20):
                continue  # the others print only at start-up and at the end
            text = _line(rng, k, step)
            per_node[h].append(text)
            tagged = f"[1,mpirank:{k},{h}]<stdout>:{text}"
            out.append(tagged)
            size += len(tagged) + 1
    for h in hosts:
        (plain / f"{h}.log").write_text("\n".join(per_node[h]) + "\n")
    (gathered / f"{hosts[0]}.log").write_text("\n".join(out) + "\n")
    for h in hosts[1:]:
        (gathered / f"{h}.log").write_text(
            "2025-06-03 16:37:04,004 sagemaker-training-toolkit INFO     Starting MPI run as worker node.\n")
    return plain.parent, gathered.parent


def timed(job: Path, workers: int) -> float:
    spec = discover(job)
    t0 = time.perf_counter()
    scan_files(spec.files, workers)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--mb", type=float, default=12.0, help="MB of log lines in all")
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args(argv)
    workers = [int(w) for w in args.workers.split(",")]
    print(f"{args.nodes} nodes, {args.mb:g} MB of lines; seconds (MB/s), gathered / per-node files")
    for name, rank0_only in (("every rank prints", False), ("rank 0 reports", True)):
        with tempfile.TemporaryDirectory() as tmp:
            plain, gathered = write_jobs(Path(tmp), args.nodes, args.mb, rank0_only=rank0_only)
            mb = sum(p.stat().st_size for p in (gathered / "logs").iterdir()) / (1 << 20)
            for w in workers:
                ref, got = timed(plain, w), timed(gathered, w)
                print(f"  {name:18} workers={w}: per-node files {ref:6.2f} s ({mb / ref:5.1f} MB/s)  "
                      f"gathered {got:6.2f} s ({mb / got:5.1f} MB/s)  ratio {got / ref:4.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
