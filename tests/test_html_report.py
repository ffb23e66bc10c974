"""The HTML report without a browser: what the charts are fed, that every untrusted string is
inert (HTML and the Prefect markdown artifact), and the CLI's --html on diagnose and show."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from html_cases import CDATA, HOSTILE_NODE, IMG, MDLINK, SCRIPT, healthy_job, hostile_job
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import megatron_node, write_job, xid_job
from l4.cli import app
from l4.engine import diagnose
from l4.htmlreport import render_html, write_html

#: every element the renderer itself writes; anything else came from input
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "p", "b", "i",
    "code", "pre", "span", "div", "section", "table", "tr", "th", "td", "details", "summary",
    "ul", "li", "footer", "svg", "rect", "line", "text", "path", "polyline",
}


class Tags(HTMLParser):
    """Every start tag, every attribute and all text of a page, as a browser parses it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs

    def handle_data(self, data):
        self.text.append(data)


def parse(page: str) -> Tags:
    p = Tags()
    p.feed(page)
    p.close()
    return p


def assert_inert(page: str) -> Tags:
    p = parse(page)
    assert set(p.tags) <= ALLOWED_TAGS, set(p.tags) - ALLOWED_TAGS
    assert not [a for a, _ in p.attrs if a.startswith("on") or a in ("src", "href", "srcdoc")]
    assert p.tags.count("script") == 0 and p.tags.count("style") == 1
    return p


@pytest.fixture(scope="module")
def sim_report(tmp_path_factory) -> tuple[dict, dict]:
    from l4.sim.simulate import simulate_case

    out = tmp_path_factory.mktemp("sim")
    truth = simulate_case(out, 7)
    rep = diagnose(out / "failed", [out / "baseline-0", out / "baseline-1"], store_path=False)
    return rep, truth


def test_simulated_job_report_tells_the_story(sim_report):
    rep, truth = sim_report
    page = render_html(rep)
    p = assert_inert(page)
    text = " ".join(p.text)
    culprit = rep["nodes"][0]["node"]
    assert culprit in truth["faulty_nodes"]
    # the verdict comes first and names culprit, stage and iteration
    verdict = page[page.index('id="verdict"'):page.index('id="timeline"')]
    assert culprit in verdict and rep["stage"] in verdict
    assert str(rep["iterations"][0]["iteration"]) in verdict
    for anchor in ("timeline", "iterations", "stages", "nodes", "events"):
        assert f'id="{anchor}"' in page
    assert page.count("<svg") == 3 and "<footer>" in page
    tl = rep["charts"]["timeline"]
    rows = {r["node"]: r for r in tl["nodes"]}
    assert rows[culprit]["culprit"] and sum(r["culprit"] for r in tl["nodes"]) == 1
    assert rows[culprit]["first_anomaly"] is not None and rows[culprit]["marks"]
    assert tl["job_stop"] == tl["span"]
    its = rep["charts"]["iterations"]
    assert its["failure"] == rep["iterations"][0]["iteration"]
    assert its["suspicious"][:1] == [rep["iterations"][0]["iteration"]] and its["points"]
    assert rep["charts"]["stages"]["final"] == rep["stage"]
    # examples keep file:line, traceback context folds
    ex = rep["events"][0]["examples"][0]
    assert f"{ex['file']}:{ex['line']}" in text
    assert "<details><summary>traceback context" in page
    assert "l4 " in text and "input files" in text


def test_charts_survive_storing_as_json(sim_report):
    rep, _ = sim_report
    again = json.loads(json.dumps(rep))
    assert render_html(again).split("rendered")[0] == render_html(rep).split("rendered")[0]


def test_hostile_lines_file_names_and_job_json_stay_text(tmp_path):
    job = hostile_job(tmp_path / "failed")
    bases = [healthy_job(tmp_path / "b0"), healthy_job(tmp_path / "b1", seed=2)]
    rep = diagnose(job, bases, store_path=False)
    assert rep["nodes"][0]["node"] == HOSTILE_NODE
    page = render_html(rep)
    p = assert_inert(page)
    text = "".join(p.text)
    for bad in (SCRIPT, IMG, CDATA, HOSTILE_NODE, rep["job_id"], "cfg-<i>x</i>",
                "[click for the fix](javascript:"):
        assert bad in text, bad
    assert "<script>" not in page and "onerror=\"" not in page and "<img" not in page


untrusted = st.text(alphabet=st.sampled_from(list("<>&\"'`/=;:[]()!*_#|\\ \n\tabcx<>!-]]>")),
                    max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=untrusted, node=untrusted, tpl=untrusted, line=untrusted, ctx=untrusted,
       fname=untrusted, title=untrusted, warn=untrusted)
def test_any_string_anywhere_renders_as_text(job, node, tpl, line, ctx, fname, title, warn):
    rep = {
        "job_id": job, "config_id": job, "framework": node, "stage": tpl,
        "nodes": [{"node": node, "score": 1.0, "evidence": {"specific": 1.0}}],
        "iterations": [{"iteration": 3, "score": 1.0}],
        "events": [{"template": tpl, "score": 1.0, "nodes": [node], "count": 1, "symptom": False,
                    "examples": [{"file": fname, "line": 7, "text": line, "context": [ctx]}]}],
        "root_causes": [{"pattern_id": title, "title": title, "category": title,
                         "similarity": 0.9, "action": title}],
        "diagnosis_id": title, "warnings": [warn],
        "files": [{"file": fname, "node": node, "lines": 1, "bytes": 1, "status": "error",
                   "error": warn}],
        "baseline": {"used": True, "jobs": [job], "pool": False},
        "charts": {
            "timeline": {"clock": "wall", "t0": 0, "span": 10, "bins": 10, "n_nodes": 1,
                         "nodes": [{"node": node, "culprit": True, "start": 0, "stop": 9,
                                    "first_anomaly": 8, "first_anomaly_line": 7,
                                    "marks": [[8, 2, 3]]}], "job_stop": 10},
            "iterations": {"unit": "s", "points": [[1, 1.0, 1.0], [2, 1.0, 2.0]],
                           "suspicious": [2], "failure": 2, "culprit": node, "healthy": [1, 1, 1]},
            "stages": {"node": node, "segments": [{"stage": tpl, "start": 0, "end": 9}],
                       "final": tpl},
        },
    }
    page = render_html(rep)
    p = assert_inert(page)
    text = "".join(p.text)
    for s in (job, node, line, title):
        assert s.strip() == "" or s in text or s[:20] in text


def _shift_clock(text: str, seconds: int) -> str:
    def move(m: re.Match) -> str:
        t = datetime.strptime(m.group(0), "%Y-%m-%d %H:%M:%S") + timedelta(seconds=seconds)
        return t.strftime("%Y-%m-%d %H:%M:%S")

    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", move, text)


def test_disagreeing_clocks_are_aligned_by_progress(tmp_path):
    nodes = {}
    for r in range(4):
        text = megatron_node(60, rank=r, prints_iters=True, fail_at=41 if r == 2 else None,
                             fail_lines=("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",)
                             if r == 2 else (), victim_from=None if r == 2 else 41)
        nodes[f"node-{r}"] = _shift_clock(text, 30) if r == 0 else text
    skewed = diagnose(write_job(tmp_path / "skewed", nodes), [], store_path=False)
    tl = skewed["charts"]["timeline"]
    assert tl["clock"] == "progress" and 25 <= tl["skew_s"] <= 35
    rows = {r["node"]: r for r in tl["nodes"]}
    # after alignment node-0 stops with the others, not 30 s later
    assert abs(rows["node-0"]["stop"] - rows["node-1"]["stop"]) < 3
    assert "aligned by training progress, not by clock" in render_html(skewed)
    nodes["node-0"] = _shift_clock(nodes["node-0"], -30)
    same = diagnose(write_job(tmp_path / "same", nodes), [], store_path=False)
    assert same["charts"]["timeline"]["clock"] == "wall"
    assert "own clocks" in render_html(same)


def test_large_jobs_show_the_suspicious_nodes_and_summarise_the_rest(tmp_path):
    from l4.chartdata import MAX_NODE_ROWS

    n = MAX_NODE_ROWS + 6
    job = xid_job(tmp_path / "big", n_nodes=n, culprit=n - 3)
    base = xid_job(tmp_path / "ok", n_nodes=n, healthy=True, seed=1)
    rep = diagnose(job, [base], store_path=False)
    tl = rep["charts"]["timeline"]
    assert len(tl["nodes"]) == MAX_NODE_ROWS and tl["rest"]["n"] == 6
    assert tl["nodes"][0]["node"] == f"node-{n - 3}" and tl["nodes"][0]["culprit"]
    assert tl["rest"]["with_anomaly"] == 6 and tl["rest"]["bins"]
    page = render_html(rep)
    assert "6 other nodes" in page and f"The {MAX_NODE_ROWS} most suspicious of {n} nodes" in page


def test_healthy_band_comes_from_the_baselines(xid_case):
    failed, bases = xid_case
    with_base = diagnose(failed, bases, store_path=False)
    band = with_base["charts"]["iterations"]["healthy"]
    assert band and band[0] <= band[1] <= band[2] and 0.5 <= band[1] <= 2.0
    assert "healthy runs (10th-90th percentile)" in render_html(with_base)
    alone = diagnose(failed, [], store_path=False)
    assert alone["charts"]["iterations"]["healthy"] is None
    assert "no healthy band" in render_html(alone)


def test_a_report_without_chart_data_still_renders():
    old = {"job_id": "j1", "stage": "training", "nodes": [{"node": "n1", "score": 0.9}],
           "iterations": [], "events": [], "root_causes": []}
    old["files"] = [{"file": "logs/n1.log", "node": "n1", "lines": 9, "bytes": 99, "status": "ok"},
                    {"file": "logs/n2.log.gz", "node": "n2", "lines": 0, "bytes": 5,
                     "status": "error", "error": "not a gzip file"}]
    old["timing"] = {"total_s": 1.25}
    page = render_html(old)
    assert_inert(page)
    assert "n1" in page and "No timing data stored" in page and "No iteration counter" in page
    footer = page[page.index("<footer>"):]
    assert "Files not (fully) read" in footer and "logs/n2.log.gz" in footer
    assert "not a gzip file" in footer and "total_s 1.25" in footer and "Baselines: none" in footer
    assert render_html({})  # nothing at all: still a page, no exception


# --- the command line ---------------------------------------------------------------------


def test_diagnose_writes_html_next_to_its_json(xid_case, tmp_path):
    failed, bases = xid_case
    out = tmp_path / "out" / "r.html"
    out.parent.mkdir()
    args = ["diagnose", str(failed), "--no-prefect", "--no-kb", "--format", "json",
            "--html", str(out)] + [a for b in bases for a in ("-b", str(b))]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)  # stdout stays one JSON document
    assert "HTML report:" in res.stderr and out.exists()
    page = out.read_text()
    assert rep["nodes"][0]["node"] in page and page.count("<svg") == 3
    assert not list(out.parent.glob(".l4-report-*"))  # no temporary file left behind


@pytest.mark.parametrize("where, says", [("missing/dir/r.html", "does not exist"), (".", "is a directory")])
def test_a_bad_html_path_is_one_line_before_any_work(xid_case, tmp_path, where, says):
    failed, _ = xid_case
    target = tmp_path / where if where != "." else tmp_path
    res = CliRunner().invoke(app, ["diagnose", str(failed), "--no-prefect", "--no-kb",
                                   "--html", str(target)])
    assert res.exit_code == 2
    assert says in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.output and "Job " not in res.stdout  # nothing was diagnosed


def test_show_writes_the_stored_diagnosis_as_html(xid_case, tmp_path):
    from l4.kbstore import record_diagnosis

    failed, bases = xid_case
    rep = diagnose(failed, bases, store_path=False)
    did = record_diagnosis(rep)
    out = tmp_path / "shown.html"
    res = CliRunner().invoke(app, ["show", did, "--html", str(out)])
    assert res.exit_code == 0, res.output
    page = out.read_text()
    assert_inert(page)
    assert f"l4 confirm {did} --pattern" in page and "status <b>pending</b>" in page
    assert page.count("<svg") == 3 and rep["nodes"][0]["node"] in page
    res = CliRunner().invoke(app, ["show", did, "--html", str(tmp_path / "no" / "x.html")])
    assert res.exit_code == 1 and "does not exist" in res.stderr and "Traceback" not in res.output
    from l4.kbstore import confirm_diagnosis

    confirm_diagnosis(did, pattern_id="gpu-xid79-fallen-off-bus", by="sre-a")
    res = CliRunner().invoke(app, ["show", did, "--html", str(out)])
    page = out.read_text()
    assert "confirmed as <b>gpu-xid79-fallen-off-bus</b> by sre-a" in page
    assert "l4 confirm" not in page


def test_write_html_replaces_atomically(tmp_path):
    target = tmp_path / "r.html"
    target.write_text("old")
    write_html({"job_id": "j"}, target)
    assert target.read_text().startswith("<!doctype html>")
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


# --- Prefect markdown artifacts -------------------------------------------------------------


def _markdown(text: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").render(text)


def test_markdown_artifact_of_a_hostile_job_injects_nothing(tmp_path):
    from flows.artifacts import summary_markdown

    job = hostile_job(tmp_path / "failed")
    rep = diagnose(job, [healthy_job(tmp_path / "b0")], store_path=False)
    rep["root_causes"] = [{"pattern_id": "p<x>", "title": MDLINK, "category": "hardware",
                           "similarity": 0.9, "action": SCRIPT}]
    out = _markdown(summary_markdown(rep))
    tags = set(re.findall(r"<([a-z0-9]+)", out))
    assert tags <= {"h1", "h2", "ul", "li", "strong", "p", "table", "thead", "tbody", "tr",
                    "th", "td"}, tags
    assert "&lt;script&gt;" in out and "href" not in out and "<img" not in out


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>&\"'`/=;:[]()!*_#|\\-+.~{}0123456789 abwx\t\n")),
               max_size=30))
def test_md_text_is_always_plain_text(s):
    import html as htmlmod

    from flows.artifacts import md_text

    norm = " ".join(s.split())
    out = _markdown(md_text(s, limit=1000)).strip()
    if not norm:
        assert out == ""
        return
    assert out.startswith("<p>") and out.endswith("</p>"), out
    inner = out[3:-4]
    assert "<" not in inner  # no element of any kind
    assert htmlmod.unescape(inner) == norm
    cell = _markdown(f"| a |\n|---|\n| {md_text(s, limit=1000)} |\n")
    assert cell.count("<td>") == 1


def test_stored_html_goes_next_to_the_knowledge_base(tmp_path):
    from flows.artifacts import stored_html_path

    kb = tmp_path / "kb" / "kb.duckdb"
    assert stored_html_path({"diagnosis_id": "d0a1"}, kb) == tmp_path / "kb" / "reports" / "d0a1.html"
    p = stored_html_path({"job_id": "../../etc/passwd"}, kb)
    assert p.parent == tmp_path / "kb" / "reports" and "/" not in p.name


def test_served_diagnoses_store_their_html():
    import yaml

    from flows.serve import build_deployments

    diag, _ = build_deployments()
    assert diag.parameters["store_html"] is True
    doc = yaml.safe_load((Path(__file__).parents[1] / "deployments" / "prefect.yaml").read_text())
    dep = next(d for d in doc["deployments"] if d["name"] == "on-failure")
    assert dep["parameters"]["store_html"] is True
