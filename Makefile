VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: run test lint bench schemas clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Stamps re-install when pyproject.toml changes.
$(VENV)/.run-installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[media,run]'
	touch $@

$(VENV)/.all-installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[all,dev]'
	touch $@ $(VENV)/.run-installed

run: $(VENV)/.run-installed
	$(PY) -m evidencestore._demo

test: $(VENV)/.all-installed
	$(PY) -m pytest -q

lint: $(VENV)/.all-installed
	$(VENV)/bin/ruff check evidencestore tests benches
	$(VENV)/bin/ruff format --check evidencestore tests benches
	$(VENV)/bin/mypy

bench: $(VENV)/.all-installed
	$(PY) -m benches

schemas: $(VENV)/.all-installed
	$(VENV)/bin/evstore schema --write

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
