# The two commands of the README: `make repro` and `make test`. Both set up .venv first.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup test test-single test-parallel test-notebooks repro bench-overhead lab clean

setup: $(STAMP)

$(STAMP): scripts/setup.sh pyproject.toml
	PYTHON=$(PYTHON) VENV=$(VENV) bash scripts/setup.sh
	touch $@

test: setup
	$(PY) -m pytest -q -p no:cacheprovider tests

test-single: setup
	$(PY) -m pytest -q tests/single

test-parallel: setup
	$(PY) -m pytest -q tests/parallel

test-notebooks: setup
	$(PY) -m pytest -q tests/notebooks

repro: setup
	dvc repro

bench-overhead: setup
	$(PY) -m bench.perf overhead

lab: setup
	jupyter lab

clean:
	rm -rf $(VENV) .pytest_cache
