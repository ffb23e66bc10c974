"""Drive Debian's headless Chromium over the DevTools protocol (no internet, no browser
download): load a file, collect script errors, console errors and network requests, run a
check in the page and take a screenshot.  Used by the browser tests and
``benchmarks/html_render.py``.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    env = os.environ.get("L4_CHROMIUM")
    if env and Path(env).exists():
        return env
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageResult:
    load_s: float  # navigation start to the load event, wall clock
    value: object  # what the page check returned
    exceptions: list[str] = field(default_factory=list)  # uncaught script errors
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    screenshot: bytes | None = None


class Chromium:
    """One headless Chromium process with one page, talked to over a websocket."""

    def __init__(self, binary: str | None = None, *, width: int = 1200, height: int = 900,
                 timeout: float = 30.0):
        self.binary = binary or find_chromium()
        if not self.binary:
            raise FileNotFoundError("chromium not found")
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="l4-chromium-")
        self.proc = subprocess.Popen(
            [self.binary, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
             f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        port = self._port()
        from urllib.request import urlopen

        targets = json.loads(urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        page = next(t for t in targets if t.get("type") == "page")
        from websockets.sync.client import connect

        self.ws = connect(page["webSocketDebuggerUrl"], max_size=64 << 20, open_timeout=10)
        self._id = 0
        self.events: list[dict] = []
        for method in ("Page.enable", "Runtime.enable", "Network.enable", "Log.enable"):
            self.call(method)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def _port(self) -> int:
        marker = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with code {self.proc.returncode}")
            if marker.exists():
                text = marker.read_text().split()
                if text:
                    return int(text[0])
            time.sleep(0.05)
        raise TimeoutError("chromium did not open its DevTools port")

    def call(self, method: str, params: dict | None = None) -> dict:
        self._id += 1
        my = self._id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params or {}}))
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer to {method}")
            msg = json.loads(self.ws.recv(timeout=left))
            if msg.get("id") == my:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev.get("method") == method:
                    return self.events.pop(i)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {method}")
            self.events.append(json.loads(self.ws.recv(timeout=left)))

    def load(self, path: Path, check: str = "true", *, screenshot: bool = False,
             full_page: bool = True) -> PageResult:
        """Open ``path``, wait for the load event, evaluate ``check`` (a JS expression whose
        value must be JSON-serialisable) and gather what went wrong."""
        self.events.clear()
        url = Path(path).resolve().as_uri()
        t0 = time.perf_counter()
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")
        load_s = time.perf_counter() - t0
        # one animation frame: layout and paint have happened
        self.call("Runtime.evaluate", {"expression": "new Promise(r => requestAnimationFrame(() => r(1)))",
                                       "awaitPromise": True})
        res = self.call("Runtime.evaluate", {"expression": check, "returnByValue": True,
                                             "awaitPromise": True})
        if "exceptionDetails" in res:
            raise RuntimeError(f"page check failed: {res['exceptionDetails']}")
        value = res.get("result", {}).get("value")
        shot = None
        if screenshot:
            params: dict = {"format": "png"}
            if full_page:
                m = self.call("Page.getLayoutMetrics")
                size = m.get("cssContentSize") or m.get("contentSize")
                params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"],
                                  "scale": 1}
                params["captureBeyondViewport"] = True
            shot = base64.b64decode(self.call("Page.captureScreenshot", params)["data"])
        out = PageResult(load_s=load_s, value=value, screenshot=shot)
        for ev in self.events:
            m, p = ev.get("method"), ev.get("params", {})
            if m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.exceptions.append(str(d.get("exception", {}).get("description") or d.get("text")))
            elif m == "Runtime.consoleAPICalled" and p.get("type") == "error":
                out.console_errors.append(" ".join(str(a.get("value")) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.console_errors.append(str(p["entry"].get("text")))
            elif m == "Network.requestWillBeSent":
                out.requests.append(p.get("request", {}).get("url", ""))
        return out

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: what the browser tests ask the page: charts drawn, scripts absent, text as shown
PAGE_CHECK = """(() => {
  const svgs = [...document.querySelectorAll('svg.chart')].map(s => {
    const b = s.getBoundingClientRect();
    return {label: s.getAttribute('aria-label'), w: b.width, h: b.height,
            shapes: s.querySelectorAll('rect,path,polyline,line').length};
  });
  return {svgs, scripts: document.querySelectorAll('script').length,
          imgs: document.querySelectorAll('img').length,
          iframes: document.querySelectorAll('iframe,object,embed').length,
          links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
          text: document.body.innerText, pwned: window.__l4pwned || null,
          title: document.title};
})()"""
