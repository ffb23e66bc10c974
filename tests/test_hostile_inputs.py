"""Hostile job directories, each run through the real ``l4 diagnose`` in a child process.

Every case must give either a valid JSON report (unreadable files listed in ``files`` with a
reason) or a one-line ``error:`` with exit code 1 or 2: never a traceback, never a hang
(a FIFO must not be opened for reading), never more than 1 GiB of peak RSS (the child's own
``VmHWM``, reported by the child at exit).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RSS_LIMIT_KB = 1 << 20  # 1 GiB
TIMEOUT_S = 180

pytestmark = pytest.mark.slow


def normal_node(rank: int, n: int = 40) -> bytes:
    lines = [f"2024-05-01 10:00:{i % 60:02d}.000 INFO rank {rank} iteration {i:6d}/ 1000 | "
             f"lm loss: {2.0 + i % 7 / 100:.4f}\n" for i in range(1, n + 1)]
    if rank == 0:
        lines.append("2024-05-01 10:01:00.000 NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")
    return "".join(lines).encode()


def base_job(root: Path, nodes: int = 3, job_json: bytes | None = None) -> Path:
    logs = root / "logs"
    logs.mkdir(parents=True)
    for r in range(nodes):
        (logs / f"node-{r}.log").write_bytes(normal_node(r))
    (root / "job.json").write_bytes(job_json if job_json is not None else
                                    json.dumps({"job_id": root.name, "config_id": "c"}).encode())
    return root


def gzip_bomb(path: Path, gib: int = 3) -> None:
    """``gib`` GiB of NULs without a newline, about 1 MB compressed per GiB."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 24)
    with open(path, "wb") as fh:
        for _ in range(gib * 64):
            fh.write(comp.compress(zeros))
        fh.write(comp.flush())


# Runs ``l4 diagnose`` and, at exit, writes the process's own peak RSS (VmHWM) to a file.
# ``ru_maxrss`` of the child (os.wait4) would not do: Linux carries the peak of the forking
# parent (this test process, which may hold an embedding model) across fork and exec.
_PEAK_WRAPPER = """
import atexit, runpy, sys
out = sys.argv.pop(1)
def peak():
    with open("/proc/self/status") as fh:
        kb = [ln.split()[1] for ln in fh if ln.startswith("VmHWM:")]
    with open(out, "w") as fh:
        fh.write(kb[0] if kb else "0")
atexit.register(peak)
sys.argv[0] = "l4"
runpy.run_module("l4.cli", run_name="__main__")
"""


def run_cli(job: Path, *, timeout: float = TIMEOUT_S) -> tuple[int, str, str, int, float]:
    """(exit code, stdout, stderr, peak RSS in KiB, seconds) of ``l4 diagnose JOB``."""
    import tempfile

    env = dict(os.environ, PYTHONPATH=str(REPO), L4_NO_PREFECT="1")
    peak_file = Path(tempfile.mkstemp(prefix="l4-peak-")[1])
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", _PEAK_WRAPPER, str(peak_file), "diagnose", os.fsencode(job),
         "--no-kb", "--format", "json", "--workers", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    out, err = [], []
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    while streams:
        if time.monotonic() - t0 > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            raise AssertionError(f"l4 diagnose {job} hung (> {timeout:.0f} s)")
        ready, _, _ = select.select(list(streams), [], [], 1.0)
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                streams[fd].append(chunk)
            else:
                del streams[fd]
    _, status, _usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    peak_text = peak_file.read_text().strip()
    peak_file.unlink()
    assert peak_text and int(peak_text) > 0, "the child did not report its peak RSS"
    return (proc.returncode, b"".join(out).decode("utf-8", "replace"),
            b"".join(err).decode("utf-8", "replace"), int(peak_text), time.monotonic() - t0)


def make_corpus(root: Path) -> dict[str, tuple[Path, str]]:
    """case name -> (job path, expected: "report" | "error")."""
    cases: dict[str, tuple[Path, str]] = {}

    def add(name: str, expect: str = "report", **kw) -> Path:
        job = base_job(root / name, **kw)
        cases[name] = (job, expect)
        return job / "logs"

    add("plain")  # nothing hostile: the memory every case is compared with
    gzip_bomb(add("gzip-bomb") / "node-bomb.log.gz")
    (add("random-binary") / "node-rand.log").write_bytes(os.urandom(3 << 20))
    (add("nul-in-lines") / "node-nul.log").write_bytes(
        b"".join(b"INFO step %d \x00\x00 value\x00 ok\n" % i for i in range(5000)))
    (add("line-50mb") / "node-long.log").write_bytes(
        b"INFO start\n" + b"x" * (50 << 20) + b"\nINFO end\n")
    (add("cr-only") / "node-cr.log").write_bytes(
        b"".join(b"progress %d%%\r" % i for i in range(200000)))
    (add("latin-1") / "node-latin.log").write_bytes(
        "".join(f"INFO Température {i} °C, Überlauf à l'étape {i}\n" for i in range(500))
        .encode("latin-1"))
    gz = zlib.compressobj(6, zlib.DEFLATED, 31)
    full = gz.compress(normal_node(7, 2000)) + gz.flush()
    (add("gzip-truncated") / "node-trunc.log.gz").write_bytes(full[: len(full) // 2])
    (add("gzip-empty") / "node-empty.log.gz").write_bytes(b"")
    (add("gzip-fake") / "node-fake.log.gz").write_bytes(b"this is not gzip at all\n" * 100)
    (add("empty-file") / "node-empty.log").write_bytes(b"")
    os.mkfifo(add("fifo") / "node-fifo.log")
    (add("broken-symlink") / "node-dangling.log").symlink_to(root / "does-not-exist.log")
    loop = add("symlink-loop")
    (loop / "node-a.log").symlink_to(loop / "node-b.log")
    (loop / "node-b.log").symlink_to(loop / "node-a.log")
    (add("dir-named-log") / "node-dir.log").mkdir()
    odd = add("odd-names")
    for name in (b"node with spaces.log", b"-leading-dash.log", b"node-\xff\xfe-latin.log"):
        Path(os.fsdecode(os.fsencode(odd) + b"/" + name)).write_bytes(normal_node(3))
    many = add("5000-tiny-files", nodes=0)
    for i in range(5000):
        (many / f"n{i:04d}.log").write_bytes(b"INFO rank %d ok\n" % i + (
            b"ERROR NVRM: Xid 79 GPU has fallen off the bus\n" if i == 17 else b""))
    add("job-json-invalid", job_json=b"{not json")
    add("job-json-list", job_json=b'["a", "b"]')
    add("job-json-wrong-types", job_json=json.dumps(
        {"job_id": {"x": 1}, "config_id": [1], "status": 3, "framework": ["megatron"],
         "nodes": ["node-0.log"]}).encode())
    (root / "no-logs-dir").mkdir()
    (root / "no-logs-dir" / "job.json").write_text("{}")
    cases["no-logs-dir"] = (root / "no-logs-dir", "error")
    (root / "empty-logs-dir" / "logs").mkdir(parents=True)
    cases["empty-logs-dir"] = (root / "empty-logs-dir", "error")
    (root / "job-is-a-file").write_text("not a directory\n")
    cases["job-is-a-file"] = (root / "job-is-a-file", "error")
    cases["job-missing"] = (root / "nowhere", "error")
    return cases


UNREADABLE = {"fifo": "FIFO", "broken-symlink": "broken symlink", "symlink-loop": "symlink loop",
              "dir-named-log": "directory", "gzip-fake": "", "gzip-truncated": "ends early"}
# found unreadable when the directory is listed (lstat/stat), never opened: their entry
# says "unreadable", not the "error" of a file that failed while being read
LISTED = {"fifo": "logs/node-fifo.log", "broken-symlink": "logs/node-dangling.log",
          "symlink-loop": "logs/node-a.log", "dir-named-log": "logs/node-dir.log"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    return make_corpus(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def plain_rss_kb(corpus) -> int:
    """Peak RSS of ``l4 diagnose`` on a small job without anything hostile."""
    code, _, err, rss_kb, _ = run_cli(corpus["plain"][0])
    assert code == 0, err[-2000:]
    return rss_kb


@pytest.mark.parametrize("case", [
    "gzip-bomb", "random-binary", "nul-in-lines", "line-50mb", "cr-only", "latin-1",
    "gzip-truncated", "gzip-empty", "gzip-fake", "empty-file", "fifo", "broken-symlink",
    "symlink-loop", "dir-named-log", "odd-names", "5000-tiny-files", "job-json-invalid",
    "job-json-list", "job-json-wrong-types", "no-logs-dir", "empty-logs-dir", "job-is-a-file",
    "job-missing",
])
def test_hostile_case(corpus, case, request):
    job, expect = corpus[case]
    code, out, err, rss_kb, secs = run_cli(job)
    print(f"\n[{case}: exit {code}, {secs:.1f} s, peak RSS {rss_kb / 1024:.0f} MB]")
    assert "Traceback" not in err and "Traceback" not in out, err[-3000:]
    assert rss_kb <= RSS_LIMIT_KB, f"{case}: peak RSS {rss_kb / 1024:.0f} MB"
    if expect == "error":
        assert code in (1, 2), (code, out, err)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        return
    assert code == 0, err[-2000:]
    rep = json.loads(out)
    assert rep["nodes"] and isinstance(rep["events"], list)
    files = {f["file"]: f for f in rep["files"]}
    if case in UNREADABLE:
        bad = [f for f in files.values() if f["status"] in ("unreadable", "error", "partial")]
        assert bad, rep["files"]
        assert all(f["error"] for f in bad)
        assert UNREADABLE[case] in " ".join(f["error"] for f in bad)
    if case in LISTED:
        assert files[LISTED[case]]["status"] == "unreadable", files[LISTED[case]]
    if case == "line-50mb":  # streamed and cut: the line is never held whole
        assert files["logs/node-long.log"]["status"] == "ok"
        extra_kb = rss_kb - request.getfixturevalue("plain_rss_kb")
        assert extra_kb < 50 << 10, f"{extra_kb / 1024:.0f} MB more than a plain job"
        assert any("lines longer than 4096 bytes were cut" in w for w in rep["warnings"])
    if case == "gzip-bomb":
        bomb = files["logs/node-bomb.log.gz"]
        assert bomb["status"] in ("ok", "partial", "empty") and bomb["lines"] <= 2
    if case == "odd-names":
        assert len([f for f in files.values() if f["status"] == "ok"]) == 6
    if case == "5000-tiny-files":
        assert len(rep["nodes"]) == 5000 and rep["nodes"][0]["node"] == "n0017"
    if case.startswith("job-json"):
        assert any("job.json" in w for w in rep["warnings"]), rep["warnings"]
        assert rep["job_id"] == case  # the directory's name, not a value of the wrong type
    if case == "job-json-wrong-types":
        for key in ("job_id", "config_id", "framework", "nodes"):
            assert any(f"'{key}' ignored" in w for w in rep["warnings"]), (key, rep["warnings"])
