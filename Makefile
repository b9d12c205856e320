# The two commands of the README: `make repro` and `make test`. Both set up .venv first.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup test test-serial test-gpu test-single test-parallel test-notebooks test-cluster cluster-setup repro bench-overhead bench-link lab clean

setup: $(STAMP)

# GPU=cu13 or GPU=cu12: a CUDA torch, the CUDA toolkit and NCCL, Horovod built with NCCL (scripts/setup-gpu.sh)
$(STAMP): scripts/setup.sh scripts/setup-gpu.sh pyproject.toml
	PYTHON=$(PYTHON) VENV=$(VENV) $(if $(GPU),GPU=$(GPU) bash scripts/setup-gpu.sh,bash scripts/setup.sh)
	touch $@

# tests/cluster needs root (network namespaces); it installs openssh-server on first use (scripts/setup-cluster.sh)
# and is skipped, with the reason printed (-rs), where it cannot run. Two pytest processes side by side
# (scripts/test.sh: cluster + notebooks, parallel + single + one DVC test); test-serial runs them one after the other
test: setup
	PY=$(PY) bash scripts/test.sh

test-serial: setup
	$(PY) -m pytest -q -rs -p no:cacheprovider tests

# the tests that need a GPU (skipped, with the reason, where torch.cuda.is_available() is False)
test-gpu: setup
	$(PY) -m pytest -q -rs -p no:cacheprovider -m gpu tests

test-single: setup
	$(PY) -m pytest -q tests/single

test-parallel: setup
	$(PY) -m pytest -q tests/parallel

test-notebooks: setup
	$(PY) -m pytest -q tests/notebooks

test-cluster: setup cluster-setup
	$(PY) -m pytest -q -rs tests/cluster

# the emulated cluster's system packages (openssh-server, iproute2, slurm-wlm, munge; root); also run by its first use
cluster-setup:
	bash scripts/setup-cluster.sh

repro: setup
	dvc repro

bench-overhead: setup
	$(PY) -m bench.perf overhead

bench-link: setup cluster-setup
	$(PY) -m bench.perf link

lab: setup
	jupyter lab

clean:
	rm -rf $(VENV) .pytest_cache
