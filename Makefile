# Two commands matter: `make demo` (see l4 work) and `make test` (the whole suite).
# Both install what they need into .venv first (scripts/setup.sh, idempotent).
PY := .venv/bin/python
DEMO := demo

.PHONY: setup demo test lint bench clean

setup:
	bash scripts/setup.sh

demo: setup
	rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(PY) -m l4.cli simulate $(DEMO)/case --seed 7
	L4_KB=$(DEMO)/kb.duckdb L4_TEMPLATES=$(DEMO)/templates.drain3 \
	  $(PY) -m l4.cli diagnose $(DEMO)/case/failed \
	    --baseline $(DEMO)/case/baseline-0 --baseline $(DEMO)/case/baseline-1 \
	    --html $(DEMO)/report.html
	@echo "ground truth: $(DEMO)/case/truth.json"
	@echo "HTML report (open it in a browser): $(DEMO)/report.html"

test: setup
	$(PY) -m pytest -q -n 2

lint: setup
	.venv/bin/ruff check l4 flows kb tests benchmarks

bench: setup
	$(PY) benchmarks/accuracy.py

clean:
	rm -rf .venv $(DEMO) .pytest_cache
