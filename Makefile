# The two commands of the README: `make run` and `make test`.
# Everything is installed from this repository's own files: Python packages at
# the versions pinned in constraints.txt, Kafka jars through ops/kafka/pom.xml.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint constraints

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $@

run: $(STAMP)
	$(BIN)/pagestream up

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

# Re-pin after changing dependencies in pyproject.toml (then run `make test`).
constraints:
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^pip==' > constraints.txt
