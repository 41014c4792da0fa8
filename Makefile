# Two commands: `make run` (portal on an embedded default) and `make test` (the suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000
# Test processes side by side (pytest-xdist): one per core, at most 4.
TEST_WORKERS ?= auto

.PHONY: run test lint bench install install-dev clean

$(VENV)/bin/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed"'
	@$(PYTHON) -m venv $(VENV) || { echo "python3 -m venv failed: on Debian/Ubuntu run 'apt-get install python3-venv'"; exit 1; }
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed-run: pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install --quiet -e .
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install --quiet -e '.[dev,ml]'
	@touch $@ $(VENV)/.installed-run

install: $(VENV)/.installed-run
install-dev: $(VENV)/.installed-dev

run: install
	$(BIN)/python manage.py migrate --noinput -v0
	$(BIN)/python manage.py seed_catalog
	$(BIN)/python manage.py seed_demo
	$(BIN)/python manage.py seed_nodes
	$(BIN)/python manage.py devserver --addr $(HOST):$(PORT)

test: install-dev
	$(BIN)/pytest -n $(TEST_WORKERS) --maxprocesses 4 --dist worksteal $(PYTEST_ARGS)

lint: install-dev
	$(BIN)/ruff check .

# bench/scale_fill.py is the bulk filler of bench/scale_bench.py, not a bench of its own.
bench: install-dev
	@for f in $(filter-out bench/scale_fill.py,$(wildcard bench/*.py)); do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf var staticfiles .pytest_cache
