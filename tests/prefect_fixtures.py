"""Shared helpers for the orchestration tests: small simulated jobs and an isolated Prefect.

Kept out of ``conftest.py`` on purpose; tests import what they need from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

CULPRIT = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."
VICTIM = ("[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, "
          "OpType=ALLREDUCE, NumelIn=1048576, Timeout(ms)=600000) ran for 600123 milliseconds "
          "before timing out.")


def _letters(n: int) -> str:
    """A digit-free name unique to ``n`` (digits would be collapsed before masking)."""
    out = ""
    while True:
        n, r = divmod(n, 26)
        out += chr(97 + r)
        if n == 0:
            return "shard" + out


def _line(t: int, text: str) -> str:
    return f"2024-05-01 10:{t // 3600 % 60:02d}:{t // 60 % 60:02d}.{t % 60:02d}0 {text}\n"


NOISE = (
    "DEBUG rank {rank} dataloader opened /data/corpus/{word}/part.idx for worker {k}",
    "NCCL INFO comm 0x7f3a{k:04x} rank {rank} nranks 64 cudaDev {k} busId 3b000 - Init COMPLETE",
    "DEBUG rank {rank} optimizer step: grad norm {ms}.{k} clipped to 1.0",
    "INFO rank {rank} memory allocated {ms} MB, reserved {k} GB, max allocated {ms} MB",
    "DEBUG rank {rank} pipeline stage {k} sent activations ({ms} KB) to next stage",
)


def node_lines(rank: int, iterations: int, *, failed: bool, culprit: bool,
               noise: int = 0) -> list[str]:
    """One node's log: start-up, training iterations (each followed by ``noise`` routine
    debug lines), and the failure if any."""
    out = [
        _line(0, f"INFO rank {rank}: initializing torch.distributed with backend nccl"),
        _line(1, f"NCCL INFO Channel 00/02 : {rank} -> {rank + 1} via P2P/IPC"),
        _line(2, "INFO loading checkpoint from /ckpt/iter_0000000"),
        _line(3, "INFO building train dataset with 1000000 samples"),
    ]
    t = 10
    for it in range(1, iterations + 1):
        out.append(_line(t, f" iteration {it:8d}/ 100000 | consumed samples: {it * 512} | "
                            f"elapsed time per iteration (ms): {1200 + (it * 7) % 50} | "
                            f"lm loss: {2.0 + (it % 13) / 100:.6E} | loss scale: 65536.0"))
        out.append(_line(t, f"DEBUG rank {rank} allreduce bucket {it % 4} done in {it % 9} ms"))
        for k in range(noise):
            # numbers that do not count anything (a step counter would be an iteration marker)
            a, ms = (it * it + 3 * k * k) % 97, (31 * it * it + 17 * k * k) % 997
            word = _letters((it * noise + k) * 131 + rank)  # a file name seen once
            out.append(_line(t, NOISE[k % len(NOISE)].format(rank=rank, k=a, ms=ms, word=word)))
        t += 1
    if failed:
        if culprit:
            out.append(_line(t, CULPRIT))
            out.append(_line(t, "RuntimeError: CUDA error: unspecified launch failure"))
        else:
            out.append(_line(t + 600, VICTIM.format(rank=rank)))
            out.append(_line(t + 601, f"[Rank {rank}] NCCL watchdog thread terminated with exception"))
    else:
        out.append(_line(t, "INFO training finished; saving final checkpoint"))
    return out


def make_job(root: Path, *, nodes: int = 4, iterations: int = 60, failed: bool = True,
             culprit: int = 2, job_id: str | None = None, config_id: str = "cfg-a",
             noise: int = 0) -> Path:
    """Write ``root/job.json`` and ``root/logs/node-XX.log``.  Each iteration costs about
    240 + 110 * ``noise`` bytes per node (iterations=4000, noise=45: ~20 MB per node)."""
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for r in range(nodes):
        lines = node_lines(r, iterations, failed=failed, culprit=(r == culprit), noise=noise)
        with open(logs / f"node-{r:02d}.log", "w", encoding="utf-8") as fh:
            fh.writelines(lines)
    meta = {"job_id": job_id or root.name, "config_id": config_id,
            "status": "failed" if failed else "succeeded"}
    (root / "job.json").write_text(json.dumps(meta), encoding="utf-8")
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prefect_env(home: Path, api_url: str | None = None) -> dict[str, str]:
    """Environment for a child process whose Prefect state lives under ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(home / "prefect-home"),
        PREFECT_PROFILES_PATH=str(home / "prefect-home" / "profiles.toml"),
        PREFECT_API_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{home / 'prefect.db'}",
        PREFECT_RESULTS_LOCAL_STORAGE_PATH=str(home / "results"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_UI_ENABLED="false",
        PREFECT_LOGGING_LEVEL="WARNING",
        PREFECT_RUNNER_POLL_FREQUENCY="1",
    )
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return env


@contextlib.contextmanager
def prefect_server(home: Path, *, timeout: float = 240.0, port: int | None = None) -> Iterator[str]:
    """Start ``prefect server start`` on 127.0.0.1 with SQLite under ``home``; yield its API
    URL; always stop it.  ``port``: a fixed port (a server that comes back where emitters
    already point), else a free one."""
    home.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    env = prefect_env(home)
    log = open(home / "server.log", "wb")
    proc = subprocess.Popen(
        [PYTHON, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/api"
    try:
        import httpx

        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"prefect server exited: {(home / 'server.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("prefect server did not become healthy in time")
            time.sleep(0.2)
        yield url
    finally:
        stop(proc)
        log.close()


def stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Terminate a child we started (and its process group), then kill if it lingers."""
    if proc.poll() is not None:
        return
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
