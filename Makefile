# Quick start: `make run` (installs if needed, then plans a shipped example) and `make test`.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
TORCH   := torch==2.13.0
# e.g. --index-url https://download.pytorch.org/whl/cpu where pip would resolve the pinned torch to the CUDA build
TORCH_PIP_ARGS ?=
EXAMPLE ?= examples/text-classification-api.yaml

.PHONY: install browser bench-tools run test test-fast lint typecheck unit first-hour bench clean

# Torch goes in first, pinned: a CPU machine must never resolve plain `torch` (several GB of CUDA).
$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q $(TORCH) $(TORCH_PIP_ARGS)
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

install: $(BIN)/.installed

# Debian's chromium for the browser tests (Playwright cannot download its own browsers here). Needs root and
# apt-get; elsewhere it says so and the browser tests skip, naming this target.
browser:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
	  || echo "make browser: apt-get could not install chromium; the browser tests will skip"; \
	else echo "make browser: no root or no apt-get to install chromium; the browser tests will skip"; fi

# wrk for benchmarks/loadgen_vs_wrk.py (not needed by the tests).
bench-tools:
	@command -v wrk >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk

run: install
	$(BIN)/rightsize plan $(EXAMPLE) --report rightsize-report.html

lint: install
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts

typecheck: install
	$(BIN)/mypy

unit: install browser
	$(BIN)/python -m pytest -q --durations=25

# A new user's first hour from the built wheel in a clean venv: core install without torch, --help of
# every command, bad invocations (exit 2), plan from a stored profile, your own model in four formats.
first-hour: install
	scripts/first_hour.sh

test: lint typecheck unit first-hour

# The edit loop (< 2 minutes on 2 cores): no tests marked slow, browser, ray or gpu; stops at the first failure.
test-fast: install
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/python -m pytest -q -x -m "not slow and not browser and not ray and not gpu"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/*.egg-info
