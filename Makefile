# Two entry points for a fresh machine (Python 3.10+, a C compiler, make):
#   make run   - set up, provision the default model, open the edge-infer app
#   make test  - set up with dev extras, provision the test models and the software GPU
#                (Mesa's Vulkan driver + llama.cpp's Vulkan plug-in, cached), run the suite
#   make gpu GPU=vulkan|cuda - build (once, cached) and install a GPU backend plug-in
#   make rpc      - llama.cpp's RPC backend: `edge-infer worker` and `serve --rpc` (once, cached)
# The first setup compiles a portable llama-cpp-python (every x86-64 / arm64 CPU; ~25 min on
# 2 cores), cached by its build flags in ~/.cache/edge-infer/wheels (packaging/llama_wheel.py).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EI := $(BIN)/edge-infer

.PHONY: run test setup setup-dev llama models test-models gpu test-gpu rpc bench bench-native binary binary-dir test-binary clean

run: setup models
	$(EI)

test: setup-dev test-models test-gpu rpc
	$(BIN)/python -m pytest $(PYTEST_ARGS)

setup: llama $(VENV)/.installed
setup-dev: llama $(VENV)/.installed-dev

# The portable llama.cpp wheel: built once per flag set, reinstalled only when the flags change.
llama: | $(VENV)/bin/python
	$(BIN)/python packaging/llama_wheel.py

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python llama
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/python llama
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

# A GPU backend as a plug-in beside the CPU variants: never rebuilds the CPU wheel.
GPU ?= vulkan
gpu: setup
	$(BIN)/python packaging/gpu_plugin.py $(GPU)

# llama.cpp's RPC backend (a minute, once): `edge-infer worker` and `serve --rpc`.
rpc: setup
	$(BIN)/python packaging/gpu_plugin.py rpc

# The software GPU every test run uses (tests/gpu): a missing package is installed where
# apt can; without it the GPU tests skip and say why.
test-gpu: setup-dev
	if packaging/vulkan_deps.sh; then $(BIN)/python packaging/gpu_plugin.py vulkan; fi

models: setup
	$(EI) provision

test-models: setup-dev
	$(EI) provision --all

bench: setup models
	$(EI) bench smollm2 --concurrency 1,2,4,8 --max-tokens 64

# Portable vs -march=native llama.cpp, side by side in one run (builds the native wheel once).
bench-native: setup models
	$(BIN)/python packaging/llama_wheel.py --native --target .native-llama
	$(EI) bench smollm2 --concurrency 1,8 --max-tokens 64 --repeat 3 --compare-lib .native-llama/llama_cpp/lib

# Desktop binary (PyInstaller): dist/edge-infer, or dist/onedir/edge-infer/ for the folder build.
binary: setup
	packaging/build.sh

binary-dir: setup
	packaging/build.sh --onedir

test-binary: setup-dev test-models binary
	EDGE_INFER_BINARY=dist/edge-infer $(BIN)/python -m pytest tests/packaging

clean:
	rm -rf $(VENV) build dist *.egg-info
