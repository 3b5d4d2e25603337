# Habits, one word each. The venv is the one `bash tests/run` makes (python3 -m venv .venv).
PY ?= .venv/bin/python
BIN := $(dir $(PY))

.PHONY: test fast lint format typecheck layers check bench demo picture

test:            ## the whole suite, installing what it needs (the README's command)
	bash tests/run

fast:            ## the suite without the live Letta server, stopping at the first failure
	$(PY) -m pytest -q -x -m "not letta"

lint:            ## ruff: lint and formatting
	$(BIN)ruff check .
	$(BIN)ruff format --check .

format:          ## ruff: fix what can be fixed, format everything
	$(BIN)ruff check --fix .
	$(BIN)ruff format .

typecheck:       ## mypy: strict on ledger/, checked on projections/
	$(BIN)mypy

layers:          ## import-linter: the write side imports nothing above it; the read side's layers point one way
	$(BIN)lint-imports

check: lint typecheck layers   ## everything CI checks besides the tests

bench:           ## the benchmarks; results in docs/performance.md
	$(BIN)ari-ledger bench

demo:            ## the main job: a recorded ARI run replayed into a fresh checkpoint
	$(BIN)ari-ledger demo

picture:         ## the README's picture, docs/lineage-report.png, drawn from a fresh demo's report (Chromium)
	$(PY) docs/make_picture.py
