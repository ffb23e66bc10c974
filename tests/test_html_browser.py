"""The HTML report in a real browser: Debian's headless Chromium over the DevTools protocol
(``tests/chromium.py``).  Skips when no Chromium is installed (``scripts/setup.sh`` installs
it where it can: root and apt)."""

from __future__ import annotations

import pytest
from chromium import PAGE_CHECK, Chromium, find_chromium
from html_cases import CDATA, HOSTILE_NODE, IMG, SCRIPT, healthy_job, hostile_job

from l4.engine import diagnose
from l4.htmlreport import write_html

pytestmark = pytest.mark.skipif(find_chromium() is None,
                                reason="chromium not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def browser():
    try:
        b = Chromium(width=1200, height=900)
    except (OSError, RuntimeError, TimeoutError) as exc:
        pytest.skip(f"chromium cannot start here: {exc}")
    yield b
    b.close()


def _check_page(res, url: str) -> dict:
    page = res.value
    assert res.exceptions == [], res.exceptions
    assert res.console_errors == [], res.console_errors
    assert res.requests == [url], res.requests  # nothing but the file itself: no network
    charts = {s["label"]: s for s in page["svgs"]}
    assert set(charts) == {"node by time chart", "iteration chart", "stage timeline"}
    for label, s in charts.items():
        assert s["w"] > 300 and s["h"] > 40 and s["shapes"] >= 2, (label, s)
    assert page["scripts"] == 0 and page["iframes"] == 0
    assert res.screenshot and res.screenshot[:8] == b"\x89PNG\r\n\x1a\n" and len(res.screenshot) > 20_000
    return page


def test_simulated_failure_renders(browser, tmp_path):
    from l4.sim.simulate import simulate_case

    truth = simulate_case(tmp_path / "case", 3)
    case = tmp_path / "case"
    rep = diagnose(case / "failed", [case / "baseline-0", case / "baseline-1"], store_path=False)
    path = write_html(rep, tmp_path / "report.html")
    res = browser.load(path, PAGE_CHECK, screenshot=True)
    (tmp_path / "report.png").write_bytes(res.screenshot)
    page = _check_page(res, path.resolve().as_uri())
    assert page["title"] == f"l4 diagnosis: job {truth['job_id']}"
    assert rep["nodes"][0]["node"] in page["text"] and rep["stage"] in page["text"]
    print(f"\n[simulated report: {path.stat().st_size / 1024:.0f} KB, loaded in {res.load_s:.2f} s]")


def test_hostile_lines_show_as_text_and_never_run(browser, tmp_path):
    job = hostile_job(tmp_path / "failed")
    rep = diagnose(job, [healthy_job(tmp_path / "b0"), healthy_job(tmp_path / "b1", seed=2)],
                   store_path=False)
    path = write_html(rep, tmp_path / "hostile.html")
    res = browser.load(path, PAGE_CHECK, screenshot=True)
    (tmp_path / "hostile.png").write_bytes(res.screenshot)
    page = _check_page(res, path.resolve().as_uri())
    assert page["pwned"] is None  # no handler or script from the logs ran
    assert page["imgs"] == 0 and page["links"] == []
    text = page["text"]
    for shown in (SCRIPT, IMG, CDATA, HOSTILE_NODE, "[click for the fix](javascript:"):
        assert shown in text, shown
    assert "window.__l4pwned='job'" in page["title"]


@pytest.mark.slow
def test_a_256_node_report_is_small_and_quick(browser, tmp_path):
    """The issue's bound: <= 2 MB and <= 2 s in headless Chromium (``benchmarks/html_render.py``
    measures it; here a generous bound so a busy machine does not fail the suite)."""
    from l4.sim.simulate import simulate_case

    simulate_case(tmp_path / "big", 11, n_nodes=256, n_baselines=1, framework="megatron")
    rep = diagnose(tmp_path / "big" / "failed", [tmp_path / "big" / "baseline-0"], store_path=False)
    path = write_html(rep, tmp_path / "big.html")
    size = path.stat().st_size
    res = browser.load(path, PAGE_CHECK, screenshot=True)
    (tmp_path / "big.png").write_bytes(res.screenshot)
    page = _check_page(res, path.resolve().as_uri())
    print(f"\n[256 nodes: {size / 1024:.0f} KB, loaded in {res.load_s:.2f} s]")
    assert size <= 2 * 1024 * 1024
    assert res.load_s <= 10.0
    assert "232 other nodes" in page["text"]
