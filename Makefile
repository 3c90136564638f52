# The two commands: `make demo` and `make test`. Both build .venv themselves from python3.11.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | cksum | cut -d" " -f1)

.PHONY: demo test lint format docs clean browser venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/tidings demo

test: $(STAMP) browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The browser tests (emails at phone width, /docs offline, pages) drive headless Chromium,
# Debian's, through pytest-playwright: never a Playwright browser download. Installed from
# Debian when we can; without it those tests are skipped with a visible notice (failed in CI).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
	      >/dev/null 2>&1 || echo "notice: could not install chromium; browser tests skipped"; \
	  else echo "notice: chromium not found; the browser tests will be skipped"; fi; }

lint: $(STAMP)
	$(BIN)/ruff check src tests tools
	$(BIN)/ruff format --check src tests tools
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python tools/check_test_docstrings.py

format: $(STAMP)
	$(BIN)/ruff format src tests tools
	$(BIN)/ruff check --fix src tests tools

docs: $(STAMP)
	$(BIN)/python -m tidings.cli.reference cli > docs/cli.md
	$(BIN)/python -m tidings.cli.reference config > docs/configuration.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
