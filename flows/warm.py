"""A warm process next to the local Prefect server that runs ``l4 diagnose``'s flow.

Why: on a small job the diagnosis itself takes about a second, but a fresh ``l4 diagnose``
process first imports Prefect, scikit-learn and SciPy (2-4 s of CPU), compiles the
root-cause regexes and may load the embedding model, every time.  So the first
``l4 diagnose`` that uses l4's local server (:mod:`flows.localserver`) also starts this
process, detached, and later commands hand it their diagnosis over a Unix socket: it runs
the very same ``diagnose-job`` flow (a real flow run of thin tasks on the local server, in
its UI like any other) with everything already imported and cached, and streams back the
progress events, the warnings and the report.  The command itself then imports neither
Prefect nor the engine.

What the command keeps doing itself, and why:

* a job (with its baselines) larger than ``L4_WARM_MAX_BYTES`` (default 64 GiB), a
  process pool or Dask cluster asked for, or a Prefect server of the user's own
  (``PREFECT_API_URL``).  Big jobs are served too: scanning runs in the scanner pool's
  processes, not in this one, and after a 2 GB, 64-node job this process held ~465 MB,
  the same after three such jobs (memory is handed back after each), while the command
  that ran the flow itself paid 3-4 s of imports again;
* anything the warm process cannot do (not running and not startable, a different l4
  version, it died mid-run, an unexpected error): the command runs the flow in-process as
  before, so the warm path changes how fast, never what comes out.

Records under ``<server dir>/warm/``: ``sock`` (the socket; in the temp dir when that path
is too long for one), ``pid``, ``code`` (a
fingerprint of l4's source, the interpreter and the Prefect settings it was started with:
a command whose fingerprint differs stops it and starts a fresh one), ``warm.log``.
Requests are served one at a time; after each, memory is handed back to the system.  It
exits by itself after ``L4_WARM_IDLE`` seconds without a request (default 3600), and
``l4 server stop`` stops it with the server.

The client half (everything the CLI calls) imports only the standard library and
:mod:`flows.localserver`; the server half imports Prefect.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: bytes of node files (job + baselines) above which ``l4 diagnose`` runs the flow itself
WARM_MAX_BYTES = 64 << 30
#: seconds a new warm process may take to import everything and listen
START_TIMEOUT_S = 90.0
#: seconds without a request after which the warm process exits
IDLE_S = 3600.0
#: environment passed with each request (what the flow and the library read)
ENV_PREFIXES = ("L4_", "HF_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_", "TOKENIZERS_")
#: exception kinds the CLI turns into a one-line error; anything else: run in-process
KNOWN_ERRORS = ("JobError", "ValueError", "OSError", "FileNotFoundError", "KBError",
                "EmbeddingModelMissing", "SettingsError")


class WarmUnavailable(Exception):
    """The warm process could not serve this request (the caller runs the flow itself)."""


# ---------------------------------------------------------------------------------------
# records and identity


def warm_dir(server_dir: Path | None = None) -> Path:
    from flows.localserver import server_dir as default_dir

    return (server_dir or default_dir()) / "warm"


def sock_path(d: Path) -> Path:
    """``d/sock``, or a name in the temp dir derived from ``d`` when that path is longer
    than a Unix socket address may be (~107 bytes)."""
    p = d / "sock"
    if len(str(p).encode()) <= 100:
        return p
    import tempfile

    tag = hashlib.sha256(str(d).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"l4-warm-{os.getuid()}-{tag}.sock"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def code_fingerprint() -> str:
    """What the warm process must share with the command that hands it work: l4's and the
    flows' source files (path, size, mtime), the interpreter, and the Prefect settings in
    the environment.  Stat calls only: ~1 ms."""
    h = hashlib.sha256(sys.executable.encode())
    root = Path(__file__).resolve().parents[1]
    for pkg in ("l4", "flows"):
        for dirpath, dirnames, filenames in os.walk(root / pkg):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith((".py", ".yaml")):
                    p = os.path.join(dirpath, name)
                    with contextlib.suppress(OSError):
                        st = os.stat(p)
                        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    for k in sorted(os.environ):
        if k.startswith("PREFECT_") and k != "PREFECT_API_URL":
            h.update(f"{k}={os.environ[k]}\n".encode())
    return h.hexdigest()[:20]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    stat = _read(Path(f"/proc/{pid}/stat"))
    if stat and stat[stat.rfind(")") + 2:][:1] in ("Z", "X"):
        return False  # exited, not yet reaped
    cmdline = _read(Path(f"/proc/{pid}/cmdline"))
    return cmdline is None or "flows.warm" in cmdline


def running_pid(d: Path) -> int | None:
    """The recorded warm process when it is alive."""
    raw = _read(d / "pid")
    if raw and raw.isdigit() and _pid_alive(int(raw)):
        return int(raw)
    return None


def stop(server_dir: Path | None = None) -> int | None:
    """Stop the warm process (if any); returns its pid."""
    d = warm_dir(server_dir)
    pid = running_pid(d)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _pid_alive(pid):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.05)
        if _pid_alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    for name in ("pid", "code"):
        with contextlib.suppress(OSError):
            (d / name).unlink()
    with contextlib.suppress(OSError):
        sock_path(d).unlink()
    return pid


# ---------------------------------------------------------------------------------------
# the client: what ``l4 diagnose`` calls


def wanted(job: Path, baselines: list[Path], dask_address: str | None) -> bool:
    """Whether this diagnosis goes to the warm process (see the module docstring)."""
    if os.environ.get("L4_WARM", "1").strip().lower() in ("0", "false", "no"):
        return False
    if os.environ.get("L4_LOCAL_SERVER", "1").strip().lower() in ("0", "false", "no"):
        return False
    if dask_address or os.environ.get("L4_DASK_ADDRESS", "").strip():
        return False
    if os.environ.get("L4_TASK_RUNNER", "").strip().lower() not in ("", "auto", "thread", "pool"):
        return False
    if _api_url_configured():
        return False
    try:
        limit = int(float(os.environ.get("L4_WARM_MAX_BYTES", WARM_MAX_BYTES)))
    except ValueError:
        limit = WARM_MAX_BYTES
    return _job_bytes([job, *baselines], limit) <= limit


def _api_url_configured() -> bool:
    """PREFECT_API_URL in the environment or in the active Prefect profile (read without
    importing Prefect)."""
    if os.environ.get("PREFECT_API_URL", "").strip():
        return True
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    try:
        import tomllib

        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    active = os.environ.get("PREFECT_PROFILE") or data.get("active") or "ephemeral"
    prof = (data.get("profiles") or {}).get(active) or {}
    return bool(str(prof.get("PREFECT_API_URL") or "").strip())


def _job_bytes(dirs: list[Path], limit: int) -> int:
    """Bytes under each job's ``logs/`` (stops counting past ``limit``)."""
    total = 0
    for d in dirs:
        for dirpath, _dirs, files in os.walk(Path(d) / "logs"):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.stat(os.path.join(dirpath, name)).st_size
                if total > limit:
                    return total
    return total


def _connect(d: Path, timeout: float = 2.0) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(sock_path(d)))
    except OSError:
        s.close()
        raise
    s.settimeout(None)
    return s


def _start(d: Path, api_url: str, code: str) -> None:
    """Start the warm process (stopping one of another l4 version first) and wait until it
    listens."""
    stop(d.parent)
    d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PREFECT_API_URL"] = api_url
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with open(d / "warm.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "flows.warm", str(d), code],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=str(d),
        )
    timeout = float(os.environ.get("L4_WARM_START_TIMEOUT", START_TIMEOUT_S))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise WarmUnavailable(f"the warm process exited with {proc.returncode} "
                                  f"(log: {d / 'warm.log'})")
        if _read(d / "code") == code:
            with contextlib.suppress(OSError):
                _connect(d).close()
                return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    raise WarmUnavailable(f"the warm process did not listen within {timeout:.0f} s")


def ensure(api_url: str, server_dir: Path | None = None) -> Path:
    """The warm process's directory once one of this l4 version listens there (started
    now if needed).  Raises :class:`WarmUnavailable`."""
    from flows.localserver import dir_lock

    d = warm_dir(server_dir)
    code = code_fingerprint()
    with dir_lock(d):
        if running_pid(d) is not None and _read(d / "code") == code:
            try:
                _connect(d).close()
                return d
            except OSError:
                pass
        try:
            _start(d, api_url, code)
        except OSError as exc:
            raise WarmUnavailable(str(exc)) from exc
    return d


def _raise_remote(kind: str, message: str) -> None:
    """The warm process's error as the exception the CLI turns into its one-line message."""
    if kind == "JobError":
        from l4.ingest import JobError

        raise JobError(message)
    if kind in ("OSError", "FileNotFoundError"):
        raise OSError(message)
    if kind in ("ValueError", "SettingsError"):
        raise ValueError(message)
    raise type(kind, (Exception,), {})(message)  # KBError, EmbeddingModelMissing: by name


def diagnose(api_url: str, request: dict[str, Any], server_dir: Path | None = None) -> dict:
    """Run one diagnosis in the warm process (starting it if needed) and return its report;
    progress and warnings arrive on the way.  Raises :class:`WarmUnavailable` when the
    caller should run the flow itself."""
    d = ensure(api_url, server_dir)
    from l4.progress import reporter

    req = dict(request, cwd=os.getcwd(),
               env={k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)})
    try:
        sock = _connect(d)
    except OSError as exc:
        raise WarmUnavailable(f"cannot connect: {exc}") from exc
    final: dict | None = None
    with sock, sock.makefile("rwb") as fh:
        try:
            fh.write(json.dumps(req, default=str).encode() + b"\n")
            fh.flush()
            progress = reporter()
            for raw in fh:
                msg = json.loads(raw)
                if "progress" in msg:
                    name, args = msg["progress"]
                    if name in ("add_files", "file_done", "step"):
                        getattr(progress, name)(*args)
                elif "stderr" in msg:
                    sys.stderr.write(msg["stderr"])
                    sys.stderr.flush()
                elif "report" in msg or "error" in msg:
                    final = msg
                    break
        except (OSError, ValueError) as exc:  # a dead process, a torn message
            raise WarmUnavailable(f"lost the warm process: {exc}") from exc
    if final is None:
        raise WarmUnavailable("the warm process closed the connection without a report")
    if "report" in final:
        return final["report"]
    if final.get("kind") in KNOWN_ERRORS:
        _raise_remote(final["kind"], final["error"])
    raise WarmUnavailable(f"{final.get('kind')}: {final['error']}")


def try_diagnose(job: Path, baselines: list[Path], *, kb: Path | None, templates: Path | None,
                 use_kb: bool, workers: int | None, dask_address: str | None,
                 html: Path | None, force: bool) -> dict | None:
    """``l4 diagnose`` through the warm process, or None when the command should run the
    flow itself (not wanted here, or the warm process unavailable: said on stderr)."""
    if not wanted(job, baselines, dask_address):
        return None
    from flows.localserver import ServerStartError, start

    try:
        srv, started = start()
    except (ServerStartError, OSError) as exc:
        print(f"l4: the local Prefect server did not start ({str(exc)[:200]}); "
              "using a temporary one for this command", file=sys.stderr)
        os.environ["L4_LOCAL_SERVER"] = "0"  # do not wait for it a second time
        return None
    if started:
        print(f"l4: started a local Prefect server for this and later commands: "
              f"{srv.ui_url} (`l4 server stop` stops it)", file=sys.stderr)
    from l4.progress import Reporter, reporter

    def absolute(p: Path | None) -> str | None:
        return str(Path(p).expanduser().absolute()) if p else None

    request = {
        "job": absolute(job), "baselines": [absolute(b) for b in baselines],
        "kb": absolute(kb), "templates": absolute(templates), "use_kb": use_kb,
        "workers": workers, "html": absolute(html), "force": force,
        "progress": type(reporter()) is not Reporter,
    }
    t0 = time.perf_counter()
    try:
        rep = diagnose(srv.url, request)
    except WarmUnavailable as exc:
        print(f"l4: the warm diagnosis process is unavailable ({str(exc)[:200]}); running "
              "the flow in this process", file=sys.stderr)
        return None
    rep.setdefault("timing", {})["command_s"] = round(time.perf_counter() - t0, 3)
    return rep


# ---------------------------------------------------------------------------------------
# the server: ``python -m flows.warm DIR CODE``


class _Forward:
    """Progress events and warnings of the request being served, sent to its client."""

    def __init__(self, fh):
        self.fh = fh
        self.lock = threading.Lock()

    def send(self, msg: dict) -> None:
        with self.lock:
            try:
                self.fh.write(json.dumps(msg, default=str).encode() + b"\n")
                self.fh.flush()
            except OSError:
                pass  # the client went away; the diagnosis still completes and is stored


def _forward_reporter(out: _Forward):
    from l4.progress import Reporter

    class Forwarding(Reporter):
        def add_files(self, n: int, nbytes: int) -> None:
            out.send({"progress": ["add_files", [n, nbytes]]})

        def file_done(self, nbytes: int) -> None:
            out.send({"progress": ["file_done", [nbytes]]})

        def step(self, name: str) -> None:
            out.send({"progress": ["step", [name]]})

    return Forwarding()


class _StderrWriter:
    def __init__(self, out: _Forward):
        self.out = out

    def write(self, text: str) -> int:
        if text:
            self.out.send({"stderr": text})
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class _WarningHandler(logging.Handler):
    """Prefect's warnings reach the terminal in-process (``flows.diagnose.quiet_console``
    lets them through); from the warm process they are forwarded likewise."""

    def __init__(self, out: _Forward):
        super().__init__(level=logging.WARNING)
        self.out = out

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.WARNING and record.name.startswith("prefect"):
            self.out.send({"stderr": f"{record.name}: {record.getMessage()}\n"})


@contextlib.contextmanager
def _request_env(env: dict[str, str], cwd: str) -> Iterator[None]:
    """The client's ``L4_*`` (and model) environment and working directory for one
    request; the warm process's own restored afterwards."""
    saved = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
    old_cwd = os.getcwd()
    for k in saved:
        os.environ.pop(k, None)
    os.environ.update(env)
    try:
        os.chdir(cwd)
    except OSError:
        pass
    try:
        yield
    finally:
        for k in [k for k in os.environ if k.startswith(ENV_PREFIXES)]:
            os.environ.pop(k, None)
        os.environ.update(saved)
        with contextlib.suppress(OSError):
            os.chdir(old_cwd)


def _trim() -> None:
    """Hand freed memory back to the system between requests (glibc keeps it otherwise)."""
    import gc

    gc.collect()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _serve_one(conn: socket.socket, run_lock: threading.Lock, state: dict) -> None:
    try:
        with conn, conn.makefile("rwb") as fh:
            _handle(fh, run_lock, state)
    except OSError:
        pass  # the client went away (or only checked that this process listens)


def _handle(fh, run_lock: threading.Lock, state: dict) -> None:
    import l4.progress as progress
    from flows.diagnose import diagnose_job_cli

    out = _Forward(fh)
    line = fh.readline()
    if not line.strip():
        return  # a liveness check: connected and closed
    try:
        req = json.loads(line)
    except ValueError:
        req = None
    if not isinstance(req, dict) or "job" not in req:
        out.send({"error": "bad request", "kind": "Protocol"})
        return
    with run_lock:
        state["busy"] = True
        handler = _WarningHandler(out)
        root = logging.getLogger()
        root.addHandler(handler)
        previous = progress._current
        try:
            with _request_env(req.get("env") or {}, req.get("cwd") or "/"), \
                    contextlib.redirect_stderr(_StderrWriter(out)):
                if req.get("progress"):
                    progress._current = _forward_reporter(out)
                rep = diagnose_job_cli(
                    Path(req["job"]), [Path(b) for b in req.get("baselines") or []],
                    kb=Path(req["kb"]) if req.get("kb") else None,
                    templates=Path(req["templates"]) if req.get("templates") else None,
                    use_kb=bool(req.get("use_kb", True)), workers=req.get("workers"),
                    html=Path(req["html"]) if req.get("html") else None,
                    force=bool(req.get("force")),
                )
            rep.setdefault("timing", {})["prefect_server"] = "local"
            rep["timing"]["warm_process"] = True
            out.send({"report": rep})
        except BaseException as exc:  # noqa: BLE001 - reported to the client, never lost
            out.send({"error": str(exc), "kind": type(exc).__name__})
            if not isinstance(exc, Exception):
                raise
        finally:
            progress._current = previous
            root.removeHandler(handler)
            state["busy"] = False
            state["last"] = time.monotonic()
            _trim()


def serve(d: Path, code: str) -> None:
    """Listen on ``d/sock`` and run diagnoses one at a time until idle for ``L4_WARM_IDLE``
    seconds or terminated."""
    # everything a diagnosis needs, imported and compiled once (the point of this process)
    import flows.servewarm  # noqa: F401
    idle = float(os.environ.get("L4_WARM_IDLE", IDLE_S))
    sock = sock_path(d)
    with contextlib.suppress(OSError):
        sock.unlink()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(sock))
    os.chmod(sock, 0o600)
    srv.listen(16)
    srv.settimeout(1.0)
    (d / "pid").write_text(str(os.getpid()), encoding="utf-8")
    (d / "code").write_text(code, encoding="utf-8")
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    run_lock = threading.Lock()
    state: dict = {"busy": False, "last": time.monotonic()}
    print(f"l4 warm process {os.getpid()} listening on {sock}", flush=True)
    try:
        while not stopping.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                if not state["busy"] and time.monotonic() - state["last"] > idle:
                    print("idle: exiting", flush=True)
                    break
                continue
            conn.settimeout(None)
            threading.Thread(target=_serve_one, args=(conn, run_lock, state),
                             daemon=True).start()
    finally:
        srv.close()
        if _read(d / "pid") == str(os.getpid()):
            for name in ("pid", "code"):
                with contextlib.suppress(OSError):
                    (d / name).unlink()
            with contextlib.suppress(OSError):
                sock.unlink()
        with contextlib.suppress(Exception):
            from flows.diagnose import _drain

            _drain()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), sys.argv[2])
