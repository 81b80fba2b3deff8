# Two entry points (see README): `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two installs: what the tests need (every extra, a llama.cpp build, Chromium) and what the demo needs (the core:
# no compiler run, no browser), so that a fresh `make demo` reaches its first answer without the test tooling.
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-core
DATA_DIR ?= ../shared/data
ARTIFACTS ?= artifacts

.PHONY: setup test demo lint bench-resolution clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first, pinned: the CPU build on this machine's disk; a bare `torch` would pull a CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" $(BIN)/pip install --quiet -e '.[dev,bench,serve,llm,milvus,mcp]'
	# The web page test drives a real headless Chromium (Debian packages chromium + chromium-driver).
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } || \
	  echo "warning: chromium/chromium-driver not installed; the web page test will be skipped"
	touch $(STAMP) $(DEMO_STAMP)

$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e .
	touch $(DEMO_STAMP)

setup: $(STAMP)

test: setup
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check src tests bench

demo: $(DEMO_STAMP)
	$(BIN)/pgmr --data-dir $(DATA_DIR) demo --out $(ARTIFACTS)/demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
