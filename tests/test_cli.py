"""The CLI through typer's runner: the contract on stdout, clear errors, the parser alone."""

import json

from typer.testing import CliRunner

from conftest import xid_job
from l4.cli import app

runner = CliRunner()


def test_diagnose_json_is_exactly_one_object(xid_case):
    failed, bases = xid_case
    args = ["diagnose", str(failed), "--format", "json", "--no-prefect", "--no-kb"]
    for b in bases:
        args += ["--baseline", str(b)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["nodes"][0]["node"] == "node-2"


def test_diagnose_text_is_readable(xid_case):
    failed, bases = xid_case
    res = runner.invoke(app, ["diagnose", str(failed), "-b", str(bases[0]), "--no-prefect",
                              "--no-kb"])
    assert res.exit_code == 0, res.output
    assert "node-2" in res.stdout and "Failure stage: training" in res.stdout
    assert "fallen off the bus" in res.stdout


def test_diagnose_missing_job_is_a_clear_error(tmp_path):
    res = runner.invoke(app, ["diagnose", str(tmp_path / "nope"), "--no-prefect", "--no-kb"])
    assert res.exit_code == 2
    assert "does not exist" in res.output
    assert "Traceback" not in res.output


def test_parse_jsonl_gives_every_line(tmp_path):
    job = xid_job(tmp_path / "j")
    path = job / "logs" / "node-2.log"
    res = runner.invoke(app, ["parse", str(path), "--format", "jsonl"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    assert [r["line"] for r in rows] == list(range(1, len(path.read_text().splitlines()) + 1))
    xid = [r for r in rows if "fallen off" in r["template"]]
    assert len(xid) == 1 and xid[0]["template_id"]
