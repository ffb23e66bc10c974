"""``l4 server start|stop|status``: the local Prefect server that ``l4 diagnose`` starts
once and reuses (``flows.localserver``).  Registered on the ``l4`` app by ``l4.cli``;
nothing here imports Prefect."""

from __future__ import annotations

import os

import typer

from l4.cli_errors import fail as _fail

server_app = typer.Typer(
    add_completion=False, no_args_is_help=True,
    help="the local Prefect server l4 starts once and reuses (state in the user data dir)",
)


@server_app.command("start")
def start() -> None:
    """Start the local Prefect server (or find it running) and print its UI link."""
    from flows.localserver import ServerStartError
    from flows.localserver import start as start_server

    try:
        srv, started = start_server()
    except (ServerStartError, OSError) as exc:
        _fail(f"the local Prefect server did not start: {exc}", 1)
        return
    verb = "started" if started else "already running"
    typer.echo(f"{verb}: {srv.ui_url} (API {srv.url}, pid {srv.pid}, state in {srv.directory})")
    _start_warm(srv.url)


def _start_warm(api_url: str) -> None:
    """Also start the warm diagnosis process (``flows.warm``), so that the first
    ``l4 diagnose`` after ``l4 server start`` is as fast as the later ones.  Its failure is
    no error: ``l4 diagnose`` then runs the flow itself."""
    from flows import warm

    if os.environ.get("L4_WARM", "1").strip().lower() in ("0", "false", "no"):
        return
    try:
        d = warm.ensure(api_url)
    except (warm.WarmUnavailable, OSError) as exc:
        typer.echo(f"the warm diagnosis process did not start ({exc}); `l4 diagnose` runs "
                   "the flow in its own process", err=True)
        return
    typer.echo(f"warm diagnosis process: pid {warm.running_pid(d)}")


@server_app.command("stop")
def stop() -> None:
    """Stop the local Prefect server."""
    from flows.localserver import stop as stop_server

    try:
        srv = stop_server()
    except OSError as exc:
        _fail(f"cannot reach the local server's state: {exc}", 1)
        return
    typer.echo(f"stopped the server at {srv.ui_url}" if srv else "no local server was running")


@server_app.command("status")
def status() -> None:
    """Whether the local Prefect server answers (exit 1 if not), and its UI link."""
    from flows.localserver import server_dir
    from flows.localserver import status as server_status

    srv = server_status()
    if srv is None:
        typer.echo(f"not running (state in {server_dir()}); `l4 server start` starts it")
        raise typer.Exit(1)
    typer.echo(f"running: {srv.ui_url} (API {srv.url}, pid {srv.pid})")
    from flows.warm import running_pid, warm_dir

    pid = running_pid(warm_dir())
    typer.echo(f"warm diagnosis process: {f'pid {pid}' if pid else 'not running'}")


def register(app: typer.Typer) -> None:
    """Add ``server`` to the ``l4`` command."""
    app.add_typer(server_app, name="server")
