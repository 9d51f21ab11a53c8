# Two commands do everything: `make lab` (learners) and `make test` (maintainers and CI).
# Each builds .venv on first use and reinstalls only when requirements.txt or pyproject.toml change.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Two workers; --dist loadscope keeps each notebook on one worker (its cells share a kernel).
PYTEST_ARGS ?= -n 2 --dist loadscope
NBVAL := --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg
# Loaded before the installed plugins: defers the one slow import of pytest's start-up, an IRI
# parser that jsonschema (under nbval's nbformat) builds while imported, until something uses it
# (about 4 s of CPU in each pytest process: tests/lazy_iri.py). Only the long runs take it: `make
# test-unit` stays the README's plain command.
EARLY := -p tests.lazy_iri
# JupyterLab refuses to run as root (containers, CI) unless told to.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab test test-unit test-notebooks test-any-bert test-any-seed pretrain test-browser test-binder bench lint execute clean \
	test-colab test-plain test-lowest test-pythons

# On Linux, PyPI's torch is the CUDA build (about 19 nvidia-* packages, GBs that a CPU never uses):
# torch comes first from PyPI's CPU-only twin, PyTorch's own index. Where that index cannot be
# reached, pip says so and the next line takes torch from PyPI, so the install still works.
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
TORCH_PIN = $(shell grep -m1 '^torch==' requirements.txt)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@if [ "$$(uname -s)" = Linux ]; then \
	  $(BIN)/python -m pip install --quiet --no-deps --retries 1 --timeout 15 \
	    --index-url $(TORCH_CPU_INDEX) "$(TORCH_PIN)" || \
	  echo "PyTorch's CPU index cannot be reached: torch comes from PyPI (on Linux its CUDA build)"; fi
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# The series' own notebooks are marked trusted first (they came with the repository you chose to
# run), so their saved widget state and bertviz's offline scripts render on first open.
lab: $(STAMP)
	@shopt -s nullglob; $(BIN)/jupyter trust notebooks/*.ipynb notebooks/solutions/*.ipynb
	@echo "Starting JupyterLab on notebooks/ - open the http://127.0.0.1:8888/lab?token=... URL printed below; Ctrl-C stops it."
	$(BIN)/jupyter lab --notebook-dir=notebooks --ip=127.0.0.1 --port=8888 --no-browser $(ROOT_FLAG)

# Unit tests of bertlib + strict nbval: every notebook re-executed and its outputs compared.
# Two workers share the cores: one thread each for torch (OpenMP) and numpy (BLAS) unless set, so
# no worker's threads spin waiting for a core the other holds (idle 2-core machine, main 0da64ee:
# 4 min 31 s and 517 s CPU against 4 min 40 s and 543 s with one thread per core each).
test: export OMP_NUM_THREADS ?= 1
test: export OPENBLAS_NUM_THREADS ?= 1
test: export MKL_NUM_THREADS ?= 1
test: $(STAMP)
	$(BIN)/python -m pytest $(EARLY) $(PYTEST_ARGS) $(NBVAL) --ignore=tests/browser --ignore=tests/binder tests notebooks

# The fast numpy tests alone (no real BERT loaded, nothing slow): seconds, for the edit-test loop.
test-unit: $(STAMP)
	$(BIN)/python -m pytest -m "not model and not slow" --ignore=tests/browser --ignore=tests/binder tests

test-notebooks: $(STAMP)
	$(BIN)/python -m pytest $(EARLY) $(PYTEST_ARGS) $(NBVAL) notebooks

# Every notebook executed under another BERT (a seeded random 4-layer, 8-head, 256-wide model
# built offline with the bundled tokenizer): nothing may raise; outputs are not compared.
test-any-bert: $(STAMP)
	$(BIN)/python tools/any_bert.py

# Every notebook run in a real JupyterLab in headless Chromium (Debian's package, installed
# here when missing and we are root), explorer widgets moved, screenshots saved.
test-browser: $(STAMP) $(VENV)/.browser-installed
	@test -x /usr/bin/chromium || { test "$$(id -u)" = 0 && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  { echo "Chromium is missing: install it with 'sudo apt-get install -y chromium'"; exit 1; }
	$(BIN)/python -m pytest -p no:xdist -v tests/browser

$(VENV)/.browser-installed: tests/browser/requirements.txt $(STAMP)
	$(BIN)/python -m pip install --quiet -r tests/browser/requirements.txt
	touch $@

# What Binder will build: repo2docker's plan for binder/ (no Docker needed) and every pin
# resolved from PyPI for the image's Python on Linux x86-64 (needs PyPI; fails without it).
test-binder: $(STAMP) $(VENV)/.binder-installed
	$(BIN)/python -m pytest -p no:xdist -v -rP tests/test_binder.py tests/binder/test_build.py

# Every pin resolved for Python 3.11-3.14 on Linux x86-64 (the whole set) and each pin's wheel for
# macOS arm64 and Windows x86-64 (needs PyPI; in .ci/run). pip reads each wheel's METADATA through
# a local index (tests/binder/metadata_index.py) instead of downloading the wheels (~13 GB).
test-pythons: $(STAMP)
	$(BIN)/python -m pytest -p no:xdist -v -rP tests/binder/test_metadata_index.py \
	  tests/binder/test_pythons.py

$(VENV)/.binder-installed: tests/binder/requirements.txt $(STAMP)
	$(BIN)/python -m pip install --quiet -r tests/binder/requirements.txt
	touch $@

# The notebooks' first cell in its Colab branch: a fresh venv with only pip gets bertlib from this
# checkout through that cell, then runs notebooks 01, 03 and 09 (needs PyPI; minutes).
test-colab: $(STAMP)
	$(BIN)/python -m pytest -p no:xdist -v -rP tests/colab/run_colab_branch.py

# The README's macOS/Linux commands run exactly as written, in a fresh copy of the repository.
test-plain: $(STAMP)
	$(BIN)/python -m pytest -p no:xdist -v -rP tests/readme/run_plain_commands.py

# The lowest versions pyproject's ranges allow, in a fresh venv: unit tests + every notebook with
# nbval-lax, on 2 workers like `make test` (in .ci/run; about the time of `make test` plus the install).
test-lowest: $(STAMP)
	$(BIN)/python tools/lowest_versions.py

lint: $(STAMP)
	$(BIN)/ruff check bertlib tests notebooks tools benchmarks

# The larger cost sweep (notebook 05): writes benchmarks/results/ (JSON + PNG) and prints a table.
bench: $(STAMP)
	$(BIN)/python benchmarks/attention_cost.py
	$(BIN)/python benchmarks/window_vs_sdpa.py
	$(BIN)/python benchmarks/numpy_bert_speed.py

# The committed training runs of notebook 09 (seeds 0..4 into bertlib/data/tiny_bert/seedK).
pretrain: $(STAMP)
	$(BIN)/python tools/pretrain_tiny_bert.py --committed

# Notebook 09 and its solutions under a seed nobody committed: train it into a temporary folder,
# execute both notebooks against it (BERTLIB_TINY_BERT); no output comparison, nothing may raise.
SEED ?= 7
test-any-seed: $(STAMP)
	dir=$$(mktemp -d) && \
	$(BIN)/python tools/pretrain_tiny_bert.py --seed $(SEED) $$dir/seed$(SEED) && \
	BERTLIB_TINY_BERT=$$dir/seed$(SEED) $(BIN)/python -m pytest -p no:xdist -p no:cacheprovider \
	  --nbval-lax notebooks/09_pretrain_tiny_bert.ipynb notebooks/solutions/09_pretrain_tiny_bert.ipynb; \
	status=$$?; rm -rf $$dir; exit $$status

# Re-execute notebooks in place in fresh kernels (NB=notebooks/01_attention_by_hand.ipynb for one).
NB ?= notebooks/*.ipynb
execute: $(STAMP)
	$(BIN)/python tools/execute.py $(NB)

clean:
	rm -rf $(VENV) *.egg-info bertlib.egg-info
