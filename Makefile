# Two entry points for a fresh machine (Python 3.10+, a C compiler, make):
#   make run   - set up, provision the default model, open the edge-infer app
#   make test  - set up with dev extras, provision the test models, run the suite
# The first setup compiles llama-cpp-python (~7 min on 2 cores); pip caches the wheel.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EI := $(BIN)/edge-infer

.PHONY: run test setup setup-dev models test-models bench binary binary-dir test-binary clean

run: setup models
	$(EI)

test: setup-dev test-models
	$(BIN)/python -m pytest $(PYTEST_ARGS)

setup: $(VENV)/.installed
setup-dev: $(VENV)/.installed-dev

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

models: setup
	$(EI) provision

test-models: setup-dev
	$(EI) provision --all

bench: setup models
	$(EI) bench smollm2 --concurrency 1,2,4,8 --max-tokens 64

# Desktop binary (PyInstaller): dist/edge-infer, or dist/onedir/edge-infer/ for the folder build.
binary: setup
	packaging/build.sh

binary-dir: setup
	packaging/build.sh --onedir

test-binary: setup-dev test-models binary
	EDGE_INFER_BINARY=dist/edge-infer $(BIN)/python -m pytest tests/packaging

clean:
	rm -rf $(VENV) build dist *.egg-info
