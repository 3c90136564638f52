# The two commands: `make demo` and `make test`. Both build .venv themselves from python3.11.
# `make demo` installs tidings and its runtime dependencies only (what `pip install .` gives a
# user); `make test` adds the dev and bench extras (pytest, mypy, Playwright, schemathesis, ...).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
HASH := $(shell cat pyproject.toml Makefile | cksum | cut -d" " -f1)
RUNTIME := $(VENV)/.runtime-$(HASH)
DEV := $(VENV)/.dev-$(HASH)
# Test processes: one per core (pytest-xdist); each test has databases of its own.
WORKERS ?= auto

.PHONY: demo test test-fast lint format docs clean browser venv

$(RUNTIME): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	rm -f $(VENV)/.runtime-* $(VENV)/.installed-*
	touch $(RUNTIME)

$(DEV): $(RUNTIME)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	rm -f $(VENV)/.dev-*
	touch $(DEV)

venv: $(DEV)

demo: $(RUNTIME)
	$(BIN)/tidings demo

test: $(DEV) browser
	$(BIN)/python -m pytest -n $(WORKERS) $(PYTEST_ARGS)

# The quick loop while changing code: unit and integration tests on SQLite only.
test-fast: $(DEV)
	$(BIN)/python -m pytest -n $(WORKERS) -q tests/unit tests/integration -k "not postgresql"

# The browser tests (emails at phone width, /docs offline, pages) drive headless Chromium,
# Debian's, through pytest-playwright: never a Playwright browser download. Installed from
# Debian when we can; without it those tests are skipped with a visible notice (failed in CI).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
	      >/dev/null 2>&1 || echo "notice: could not install chromium; browser tests skipped"; \
	  else echo "notice: chromium not found; the browser tests will be skipped"; fi; }

lint: $(DEV)
	$(BIN)/ruff check src tests tools
	$(BIN)/ruff format --check src tests tools
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python tools/check_test_docstrings.py

format: $(DEV)
	$(BIN)/ruff format src tests tools
	$(BIN)/ruff check --fix src tests tools

docs: $(DEV)
	$(BIN)/python -m tidings.cli.reference cli > docs/cli.md
	$(BIN)/python -m tidings.cli.reference config > docs/configuration.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
