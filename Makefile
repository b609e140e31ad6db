# Every target creates the virtual environment on first use, so a fresh clone needs only
# Python 3.11+ and pip: `make demo` and `make test` do all of the set-up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test e2e controlplane lint bench clean driver-kills conformance

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/kubedra demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy --strict src

test: lint
	$(BIN)/python -m pytest

# kill -9 the node driver 100 times during prepares/unprepares (make test runs 6)
driver-kills: $(STAMP)
	KUBEDRA_DRIVER_KILLS=100 $(BIN)/python -m pytest tests/driver/test_kill.py

# The real-cluster tier: upstream's kube-apiserver, kube-controller-manager, kube-scheduler,
# etcd and kubectl, built from their Go modules into ~/.cache/kubedra on first use (Go 1.26+).
controlplane: $(STAMP)
	$(BIN)/kubedra dev-cluster build

e2e: controlplane
	$(BIN)/python -m pytest tests/e2e --e2e

# Differential runs against upstream's own allocator and CEL environment (tools/oracle,
# built with Go 1.26+ on first use): 20,000 scenarios and 50,000 selectors, report in
# docs/conformance.md. `make test` runs a fixed-seed sample of the same.
conformance: $(STAMP)
	$(BIN)/python -m tests.conformance --report docs/conformance.md

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .kubedra .pytest_cache .mypy_cache .ruff_cache
