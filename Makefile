# Two commands for a newcomer: `make demo` and `make test`. Both set themselves up.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup sandbox-tools lint fmt test demo eval bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP) sandbox-tools

# bubblewrap is the OS sandbox for test commands; install it when we can (root on Debian).
sandbox-tools:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing bubblewrap"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) >/dev/null; \
	  else \
	    echo "warning: bubblewrap (bwrap) is not installed; sandboxed commands will be refused"; \
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

bench: setup
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
