"""The ``l4`` command line.  Every command is a thin layer over a library function of the
same name, so what the CLI does a script can do too (and the other way round)."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path

import typer

from l4.cli_errors import fail as _fail

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="l4: why did this distributed training job fail? Culprit node, failure-indicating "
    "events, stage, iteration and known root cause, from the job's logs alone.",
)


class Fmt(StrEnum):
    text = "text"
    json = "json"


class ParseFmt(StrEnum):
    jsonl = "jsonl"
    text = "text"


@app.command()
def diagnose(
    job: Path = typer.Argument(..., help="failed job directory (JOB/logs/**, JOB/job.json)"),
    baseline: list[Path] = typer.Option(
        [], "--baseline", "-b", help="successful job of the same configuration (repeatable)"
    ),
    fmt: Fmt = typer.Option(Fmt.text, "--format", "-f", help="text (readable) or json (contract)"),
    kb: Path | None = typer.Option(None, "--kb", envvar="L4_KB", help="knowledge-base file"),
    templates: Path | None = typer.Option(
        None, "--templates", envvar="L4_TEMPLATES", help="template store file"
    ),
    no_kb: bool = typer.Option(False, "--no-kb", help="skip root-cause matching and recording"),
    no_prefect: bool = typer.Option(
        False, "--no-prefect", envvar="L4_NO_PREFECT",
        help="run the engine directly instead of the diagnose-job Prefect flow",
    ),
    workers: int | None = typer.Option(None, "--workers", help="parallel scan processes"),
    dask_address: str | None = typer.Option(
        None, "--dask-address", envvar="L4_DASK_ADDRESS",
        help="parse node files on this Dask cluster (tcp://host:8786); Prefect path only",
    ),
    html: Path | None = typer.Option(
        None, "--html", help="also write a self-contained HTML report with charts to this file"
    ),
    force: bool = typer.Option(
        False, "--force", help="diagnose again even if these logs were diagnosed before",
    ),
) -> None:
    """Diagnose a failed job: ranked nodes, events, stage, iterations, root causes."""
    from l4.ingest import JobError

    if html is not None:
        from l4.htmlreport import check_writable

        problem = check_writable(html)
        if problem:  # before the diagnosis, not after minutes of work
            _fail(problem)
            return
    from l4.progress import showing, wanted

    try:
        # a bar on an interactive terminal only; piped or JSON output is left as it was
        with showing(fmt == Fmt.text and wanted()):
            report = run_diagnosis(
                job, baseline, kb=kb, templates=templates, use_kb=not no_kb,
                use_prefect=not no_prefect, workers=workers, dask_address=dask_address,
                html=html,
                force=force,
            )
    except (JobError, ValueError, OSError) as exc:
        _fail(str(exc))
        return
    except Exception as exc:  # e.g. a knowledge base that cannot be opened
        if type(exc).__name__ in ("KBError", "EmbeddingModelMissing"):
            _fail(str(exc))
            return
        raise
    seen = report.get("already_diagnosed")
    if seen:
        typer.echo(f"l4: already diagnosed from the same logs as {seen['diagnosis_id']} "
                   f"({seen['status']}, {seen['created_at']}); showing it (--force diagnoses "
                   "again)", err=True)
    if fmt == Fmt.json:
        sys.stdout.write(json.dumps(report, default=str) + "\n")
    else:
        from l4.report import render_text

        typer.echo(render_text(report))
    if html is not None:
        write_html_report(report, html)


def write_html_report(report: dict, path: Path, diagnosis: dict | None = None) -> None:
    """Write the HTML report (``l4.htmlreport``); the path goes to stderr so that
    ``--format json`` output stays one JSON document."""
    from l4.htmlreport import write_html

    try:
        out = write_html(report, path, diagnosis=diagnosis)
    except OSError as exc:
        _fail(f"cannot write the HTML report to {path}: {exc.strerror or exc}", 1)
        return
    typer.echo(f"HTML report: {out}", err=True)


def run_diagnosis(job: Path, baselines: list[Path], *, kb: Path | None = None,
                  templates: Path | None = None, use_kb: bool = True,
                  use_prefect: bool = False, workers: int | None = None,
                  dask_address: str | None = None, html: Path | None = None,
                  force: bool = False) -> dict:
    """What ``l4 diagnose`` does: the flow when Prefect is wanted, else the same steps inline."""
    if use_prefect:
        try:  # the flow in l4's warm process: no Prefect import here (flows.warm)
            from flows.warm import try_diagnose
        except ImportError:
            try_diagnose = None
        if try_diagnose is not None:
            rep = try_diagnose(job, baselines, kb=kb, templates=templates, use_kb=use_kb,
                               workers=workers, dask_address=dask_address, html=html,
                               force=force)
            if rep is not None:
                return rep
        try:
            from flows.diagnose import diagnose_job_cli
        except ImportError:
            diagnose_job_cli = None
        if diagnose_job_cli is not None:
            try:
                return diagnose_job_cli(job, baselines, kb=kb, templates=templates,
                                        use_kb=use_kb, workers=workers,
                                        dask_address=dask_address, html=html,
                                        force=force)
            except RuntimeError as exc:
                if "Prefect API server" not in str(exc):
                    raise
                # no diagnosis lost to an orchestrator that could not start: the same steps
                typer.echo("l4: the temporary Prefect server did not start "
                           f"({str(exc).splitlines()[0][:120]}); running without Prefect",
                           err=True)
    from l4.pipeline import diagnose_and_record

    return diagnose_and_record(job, baselines, kb=kb, templates=templates, use_kb=use_kb,
                               workers=workers, force=force)


@app.command()
def parse(
    file: Path = typer.Argument(..., help="one log file (plain or .gz)"),
    fmt: ParseFmt = typer.Option(ParseFmt.jsonl, "--format", "-f"),
    templates: Path | None = typer.Option(
        None, "--templates", envvar="L4_TEMPLATES", help="template store file (default: in memory)"
    ),
) -> None:
    """Parse one file: one {"line", "template_id", "template"} object per input line."""
    from l4.parse import parse_file

    if not file.exists():
        _fail(f"{file} does not exist")
    for rec in parse_file(file, store_path=templates):
        if fmt == ParseFmt.jsonl:
            sys.stdout.write(json.dumps(rec) + "\n")
        else:
            sys.stdout.write(f"{rec['line']}\t{rec['template_id']}\t{rec['template']}\n")


@app.command()
def learn(
    job: Path = typer.Argument(..., help="a successful job directory"),
    config_id: str | None = typer.Option(None, "--config-id", help="override job.json config_id"),
    kb: Path | None = typer.Option(None, "--kb", envvar="L4_KB"),
    templates: Path | None = typer.Option(None, "--templates", envvar="L4_TEMPLATES"),
) -> None:
    """Add a successful job's events to the normal pool of its configuration."""
    from l4.ingest import JobError
    from l4.pipeline import learn_normal

    try:
        summary = learn_normal(job, config_id=config_id, kb=kb, templates=templates)
    except (JobError, ValueError) as exc:
        _fail(str(exc))
        return
    typer.echo(
        f"learned {summary['events']} events from {summary['job_id']} "
        f"into the normal pool of {summary['config_id']}"
    )


@app.command()
def simulate(
    out: Path = typer.Argument(..., help="output directory"),
    seed: int = typer.Option(0, "--seed"),
    framework: str | None = typer.Option(None, "--framework"),
    nodes: int | None = typer.Option(None, "--nodes"),
    iterations: int | None = typer.Option(None, "--iterations"),
    fault: str | None = typer.Option(None, "--fault"),
    baselines: int = typer.Option(2, "--baselines"),
    bytes_per_node: int | None = typer.Option(None, "--bytes-per-node"),
) -> None:
    """Write a realistic failed job, successful baselines and truth.json (ground truth)."""
    from l4.sim.simulate import simulate_case

    try:
        truth = simulate_case(out, seed, framework=framework, n_nodes=nodes,
                              iterations=iterations, fault=fault, n_baselines=baselines,
                              bytes_per_node=bytes_per_node)
    except ValueError as exc:
        _fail(str(exc))
        return
    typer.echo(
        f"wrote {out}/failed ({truth['n_nodes']} nodes, {truth['framework']}, fault "
        f"{truth['fault']['id']}) and {baselines} baseline(s); truth in {out}/truth.json"
    )


def _register_optional() -> None:
    """Commands that live in their own modules (knowledge base, orchestration)."""
    for module in ("l4.cli_kb", "l4.cli_flows", "l4.cli_server"):
        try:
            mod = __import__(module, fromlist=["register"])
        except ImportError:
            continue
        mod.register(app)


_register_optional()


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # python -m l4.cli
    app()
