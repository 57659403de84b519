# The two commands of the README: `make reproduce` and `make test`. Both set up .venv first (reused if present).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PROFILE ?= cpu

.PHONY: setup reproduce test sync nbtest nbtest-gpu pytest bench lab readme

setup: $(STAMP)

$(STAMP): settings.ini setup.py
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python >= 3.10 is needed, found " + sys.version.split()[0]'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

reproduce: setup
	$(BIN)/cosine-pitfalls reproduce --profile $(PROFILE)

test: setup
	$(MAKE) --no-print-directory sync
	$(MAKE) --no-print-directory nbtest
	$(MAKE) --no-print-directory pytest

# notebooks are the source: cleaning and exporting them must leave the checkout unchanged
sync:
	$(BIN)/nbdev_clean
	$(BIN)/nbdev_export
	@if [ -n "$$(git status --porcelain)" ]; then \
	  echo "SYNC GATE FAILED: nbdev_clean/nbdev_export changed the checkout (edit notebooks, export, commit both):"; \
	  git status --porcelain; git --no-pager diff --stat; exit 1; fi
	@echo "sync gate: notebooks clean and package in sync"

nbtest:
	$(BIN)/nbdev_test --n_workers 2 --timing

# on a machine with CUDA: also the cells flagged `#| gpu` (device checks of the losses and kNN) and `#| slow`
nbtest-gpu: setup
	$(BIN)/nbdev_test --n_workers 1 --timing --flags "gpu slow"

# in parallel, one worker per core (at most 4), a test file's tests on one worker (its module fixtures built once;
# not --dist loadgroup: pytest 9.2 stopped its grouping, pytest-xdist issue 1386)
pytest:
	$(BIN)/python -m pytest -rs -n auto --maxprocesses 4 --dist loadfile --durations 15 tests

bench: setup
	$(BIN)/python benchmarks/toy_sweep.py --out outputs/benchmarks
	$(BIN)/python benchmarks/train_throughput.py --out outputs/benchmarks
	$(BIN)/python benchmarks/import_time.py --out outputs/benchmarks

# README.md mirrors nbs/index.ipynb (no Quarto here for nbdev_readme)
readme: setup
	$(BIN)/python tools/readme_from_index.py

lab: setup
	$(BIN)/jupyter lab nbs/
