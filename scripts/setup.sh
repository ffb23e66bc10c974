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
