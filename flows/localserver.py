"""One local Prefect server per user, started once and reused by every ``l4`` command.

Without ``PREFECT_API_URL`` Prefect would start a temporary server for every command (6-14 s
each on a busy machine) and, worse, one per process-pool worker.  Instead ``l4 diagnose``
starts ``prefect server start`` once, detached, with its own ``PREFECT_HOME`` and SQLite
database under ``<user data dir>/l4/prefect-server/``, and later commands find it from the
files it leaves there:

* ``url``   its API URL (``http://127.0.0.1:<port>/api``);
* ``pid``   the server's process id (its process group is stopped by ``l4 server stop``);
* ``server.log``  what the server printed, for when it does not come up;
* ``home/`` and ``prefect.db``  its state, kept apart from the user's own Prefect profile.

A lock file keeps two commands started at the same time from starting two servers.  This
module does not import Prefect (it runs it as a program); ``flows.diagnose`` uses it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: seconds to wait for a new server's /api/health (a busy 2-core machine needs ~10-25 s)
START_TIMEOUT_S = 90.0


class ServerStartError(RuntimeError):
    """The local server did not come up (the message says why, in one line)."""


@dataclass(frozen=True)
class LocalServer:
    url: str  # API URL, ending in /api
    pid: int | None
    directory: Path

    @property
    def ui_url(self) -> str:
        """The UI link: the API URL without ``/api``."""
        return self.url.removesuffix("/api")


def server_dir() -> Path:
    """``$L4_SERVER_DIR``, else <user data dir>/l4/prefect-server (honours XDG_DATA_HOME)."""
    override = os.environ.get("L4_SERVER_DIR", "").strip()
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("l4", appauthor=False)) / "prefect-server"


def healthy(url: str, timeout: float = 2.0) -> bool:
    """True when ``url``/health answers 200."""
    import httpx

    try:
        return httpx.get(url.rstrip("/") + "/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _pid_alive(pid: int) -> bool:
    """A live process that is a Prefect server (not a reused pid of something else)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    cmdline = _read(Path(f"/proc/{pid}/cmdline"))
    return cmdline is None or "prefect" in cmdline  # no /proc: trust the pid


def _recorded(d: Path) -> LocalServer | None:
    url = _read(d / "url")
    if not url:
        return None
    raw = _read(d / "pid")
    pid = int(raw) if raw and raw.isdigit() else None
    return LocalServer(url=url, pid=pid, directory=d)


def status(d: Path | None = None) -> LocalServer | None:
    """The recorded server when it answers, else None."""
    d = d or server_dir()
    srv = _recorded(d)
    if srv is None or (srv.pid is not None and not _pid_alive(srv.pid)):
        return None
    return srv if healthy(srv.url) else None


@contextlib.contextmanager
def dir_lock(d: Path) -> Iterator[None]:
    """Hold ``d/lock`` exclusively: one process at a time starts or stops what lives in
    ``d`` (the local server, the warm process)."""
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(d: Path) -> dict[str, str]:
    """The server's environment: its own home and SQLite database under ``d``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    home = d / "home"
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_PROFILES_PATH=str(home / "profiles.toml"),
        PREFECT_API_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{d / 'prefect.db'}",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_LOGGING_LEVEL="WARNING",
        # the task-run recorder writes each task-run event in a statement of its own by
        # default (batch size 1): ~50 ms of server CPU per parse task, which on two
        # cores competes with the scanners of the job being diagnosed.  Batched, the
        # same events cost a fraction; the UI lags by at most the flush interval.
        PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_READ_BATCH_SIZE="100",
        PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE="200",
        PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL="1",
    )
    return env


#: niceness of the local server: its bookkeeping (recording task-run events) yields the
#: cores to the scanners of the diagnosis it records, and catches up while the analysis
#: leaves a core free.  On the 2 GB, 64-node job: default ``l4 diagnose`` 14.0-14.3 s at
#: niceness 0, 11.5-12.6 s at 5 (``--no-prefect``: 12.0-13.2 s).
SERVER_NICE = 5


def _lower_priority() -> None:
    with contextlib.suppress(OSError):
        os.nice(SERVER_NICE)


def _remove_records(d: Path) -> None:
    for name in ("url", "pid"):
        with contextlib.suppress(OSError):
            (d / name).unlink()


def _kill_group(pid: int, grace: float = 10.0) -> None:
    """SIGTERM the server's process group, SIGKILL what is left after ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reap it when it is our own child
            if not _pid_alive(pid):
                return
            time.sleep(0.1)


def start(d: Path | None = None, timeout: float | None = None) -> tuple[LocalServer, bool]:
    """The running local server, starting it first if none answers.  Returns (server,
    started now).  Raises :class:`ServerStartError` when it does not come up in time."""
    d = d or server_dir()
    if timeout is None:
        timeout = float(os.environ.get("L4_SERVER_START_TIMEOUT", START_TIMEOUT_S))
    with dir_lock(d):
        srv = status(d)
        if srv is not None:
            return srv, False
        old = _recorded(d)
        if old is not None and old.pid is not None and _pid_alive(old.pid):
            _kill_group(old.pid)  # alive but not answering: a hung server is no use
        _remove_records(d)
        port = _free_port()
        url = f"http://127.0.0.1:{port}/api"
        with open(d / "server.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "prefect", "server", "start",
                 "--host", "127.0.0.1", "--port", str(port)],
                env=server_env(d), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, cwd=str(d),
                preexec_fn=_lower_priority,
            )
        deadline = time.monotonic() + timeout
        while not healthy(url, timeout=1.0):
            if proc.poll() is not None:
                tail = (_read(d / "server.log") or "").splitlines()[-1:] or ["no output"]
                raise ServerStartError(f"prefect server exited with {proc.returncode}: "
                                       f"{tail[0][:160]}")
            if time.monotonic() > deadline:
                _kill_group(proc.pid)
                raise ServerStartError(f"prefect server did not answer within {timeout:.0f} s "
                                       f"(log: {d / 'server.log'})")
            time.sleep(0.2)
        (d / "pid").write_text(str(proc.pid), encoding="utf-8")
        (d / "url").write_text(url, encoding="utf-8")
        return LocalServer(url=url, pid=proc.pid, directory=d), True


def stop(d: Path | None = None) -> LocalServer | None:
    """Stop the recorded server (if any) and forget it; returns what was stopped."""
    d = d or server_dir()
    from flows.warm import stop as stop_warm

    stop_warm(d)  # the warm diagnosis process works against this server
    with dir_lock(d):
        srv = _recorded(d)
        if srv is not None and srv.pid is not None and _pid_alive(srv.pid):
            _kill_group(srv.pid)
        _remove_records(d)
        return srv
