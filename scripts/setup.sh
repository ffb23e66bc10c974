#!/usr/bin/env bash
# Create .venv and install l4 with everything it needs, offline-model included.
# Idempotent: re-running only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${L4_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
stamp="$VENV/.l4-installed"
# Headless Chromium for the HTML report's browser tests (tests/test_html_browser.py), from
# Debian's packages where this can install them (root and apt-get); elsewhere those tests
# skip.  L4_NO_APT=1 skips the attempt.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ -z "${L4_NO_APT:-}" ]; then
    echo "setup: installing chromium (Debian package) for the browser tests" >&2
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
        >/dev/null 2>&1; then
      echo "setup: chromium could not be installed; the browser tests will skip" >&2
    fi
  else
    echo "setup: chromium not found; the browser tests will skip (apt-get install chromium)" >&2
  fi
fi
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ] && [ "$stamp" -nt scripts/setup.sh ]; then
  exit 0
fi
$PIP install -q --upgrade pip
# CPU build of torch first: an unpinned torch (pulled by sentence-transformers)
# would otherwise fetch a multi-GB CUDA build.  torch 2.13.0 is the CPU wheel
# this machine kind provides (pip picks it from the local wheel directory).
if ! $VENV/bin/python -c "import torch" 2>/dev/null; then
  $PIP install -q "torch==2.13.0"
fi
$PIP install -q -e ".[dev]"
# drain3 0.9.11 itself, without its stale exact pins (see pyproject.toml).
$PIP install -q --no-deps "drain3==0.9.11"
$VENV/bin/python - <<'PY'
import importlib.metadata as m
v = m.version("drain3")
assert v == "0.9.11", f"drain3 {v} installed, 0.9.11 required"
PY
touch "$stamp"
