# Every target creates the virtual environment on first use, so a fresh clone needs only
# Python 3.11+ and pip: `make demo` and `make test` do all of the set-up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test e2e controlplane lint bench bench-quick clean driver-kills store-kills fuzz conformance

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

# Hostile input, long mode: 5,000 manifests through load/lint/apply/allocate and 20,000 CEL
# expressions through every CEL entry point (make test runs a fixed-seed sample of each).
fuzz: $(STAMP)
	KUBEDRA_FUZZ_INPUT=5000 KUBEDRA_FUZZ_CEL=20000 $(BIN)/python -m pytest -s \
		tests/fuzz/test_fuzz_input.py tests/cel/test_fuzz.py

# kill -9 the node driver 100 times during prepares/unprepares (make test runs 6)
driver-kills: $(STAMP)
	KUBEDRA_DRIVER_KILLS=100 $(BIN)/python -m pytest tests/driver/test_kill.py

# kill -9 writers and schedulers 60 times over 4 x 500 writes, and apply 60 times (make test: a few)
store-kills: $(STAMP)
	KUBEDRA_STORE_KILLS=60 KUBEDRA_APPLY_KILLS=60 $(BIN)/python -m pytest tests/scheduler/test_kills.py tests/cluster/test_apply_kill.py

# The real-cluster tier: upstream's kube-apiserver, kube-controller-manager, kube-scheduler,
# etcd and kubectl, built from their Go modules into ~/.cache/kubedra on first use (Go 1.26+).
controlplane: $(STAMP)
	$(BIN)/kubedra dev-cluster build

e2e: controlplane
	$(BIN)/python -m pytest tests/e2e --e2e

# The Helm chart deploy/helm/kubedra with its default values, as plain manifests on stdout
# (`make -s render-deploy | kubectl apply -f -`). helm is built from its Go module into
# ~/.cache/kubedra the first time; rendering needs no network and no virtual environment.
.PHONY: render-deploy
render-deploy:
	@PYTHONPATH=src $(PYTHON) -m kubedra.devcluster.deploy

# Differential runs against upstream's own allocator and CEL environment (tools/oracle,
# built with Go 1.26+ on first use): 20,000 scenarios and 50,000 selectors, report in
# docs/conformance.md. `make test` runs a fixed-seed sample of the same.
conformance: $(STAMP)
	$(BIN)/python -m tests.conformance --report docs/conformance.md

# The public CEL suites (cel-spec's simple tests, Kubernetes' CEL library tests, upstream's
# DRA compile table) read from the Go module cache, run through kubedra and the oracle.
.PHONY: cel-suites
cel-suites: $(STAMP)
	$(BIN)/python -m tests.conformance.cel_suites

bench: $(STAMP)
	$(BIN)/python -m bench

# Every benchmark once on small workloads: a check that they run, not a measurement.
bench-quick: $(STAMP)
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) .kubedra .pytest_cache .mypy_cache .ruff_cache

# kubedra's own image as an OCI archive, built with no registry and no container engine
# (Debian bookworm packages and PyPI wheels, cached in ~/.cache/kubedra/images): load it on a
# node with `ctr -n k8s.io images import dist/kubedra-image.tar` (localhost/kubedra:VERSION).
.PHONY: image
image: $(STAMP)
	$(BIN)/python -m kubedra.devcluster.images kubedra --out dist/kubedra-image.tar
