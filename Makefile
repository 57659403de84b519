# The two commands of the README: `make reproduce` and `make test`. Both set up .venv first (reused if present).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PROFILE ?= cpu

.PHONY: setup reproduce test sync nbtest smoke nbtest-gpu pytest bench null-breaks lab readme

setup: $(STAMP)

# tools/install.py: the package with its dev extra, editable, through uv where it can be fetched (a fresh venv in about a
# minute; pip took 2.5), else pip, from the indexes pip is configured with. tools/kernelspec.py: the venv's python3
# kernel shown as 'python3', the display name the notebooks store (so that opening one in JupyterLab changes nothing)
$(STAMP): settings.ini setup.py Makefile tools/install.py tools/kernelspec.py
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python >= 3.10 is needed, found " + sys.version.split()[0]'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python tools/install.py
	$(BIN)/python tools/kernelspec.py
	touch $(STAMP)

reproduce: setup
	$(BIN)/cosine-pitfalls reproduce --profile $(PROFILE)

test: setup
	$(MAKE) --no-print-directory sync
	$(MAKE) --no-print-directory nbtest
	$(MAKE) --no-print-directory smoke
	$(MAKE) --no-print-directory pytest SMOKE_OUT=$(SMOKE)

# notebooks are the source: cleaning and exporting them must leave the checkout unchanged
sync:
	$(BIN)/nbdev_clean
	$(BIN)/nbdev_export
	@if [ -n "$$(git status --porcelain)" ]; then \
	  echo "SYNC GATE FAILED: nbdev_clean/nbdev_export changed the checkout (edit notebooks, export, commit both):"; \
	  git status --porcelain; git --no-pager diff --stat; exit 1; fi
	@echo "sync gate: notebooks clean and package in sync"

# the library's notebooks and the companion's machinery; the six section notebooks (01-05b) are executed by `smoke`,
# every cell of them, once. One thread per notebook, as pytest's workers: two notebooks side by side, each spinning
# two threads on two cores, took 162 s where one thread each takes 67 s (12_evaluation 46 s -> 3 s)
nbtest:
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
	  $(BIN)/nbdev_test --n_workers 2 --timing --skip_file_re '^0[1-5][ab]?_'

# one smoke reproduction of every section (papermill runs each section notebook, every cell a test; then the pages and
# the report), into $(SMOKE); pytest's tests of the CLI, the report and the pages read it (tests/conftest.py `smoke`)
SMOKE := build/test-smoke
smoke:
	@rm -rf $(SMOKE) $(SMOKE).log; mkdir -p $(dir $(SMOKE))
	@echo "smoke reproduction of every section into $(SMOKE) (log: $(SMOKE).log)"
	@umask 022; t0=$$(date +%s); $(BIN)/cosine-pitfalls reproduce --profile smoke --out $(SMOKE) --quiet \
	  > $(SMOKE).log 2>&1 || { tail -n 60 $(SMOKE).log; exit 1; }; echo "smoke reproduction: $$(( $$(date +%s) - t0 )) s"

# on a machine with CUDA: also the cells flagged `#| gpu` (device checks of the losses and kNN) and `#| slow`
nbtest-gpu: setup
	$(BIN)/nbdev_test --n_workers 1 --timing --flags "gpu slow"

# in parallel, one worker per core (at most 4), a test file's tests on one worker (its module fixtures built once;
# not --dist loadgroup: pytest 9.2 stopped its grouping, pytest-xdist issue 1386)
# `make test` passes SMOKE_OUT (the smoke reproduction it just ran); a plain `make pytest` runs one in pytest's tmp
pytest:
	COSINE_PITFALLS_SMOKE=$(SMOKE_OUT) $(BIN)/python -m pytest -rs -n auto --maxprocesses 4 --dist loadfile --durations 15 tests

# the null tests against three broken copies of the gate's rule (Holm, testability, controls): which tests catch each
null-breaks: setup
	$(BIN)/python tools/break_gate.py --out outputs/checks/null_breaks.md

bench: setup
	$(BIN)/python benchmarks/toy_sweep.py --out outputs/benchmarks
	$(BIN)/python benchmarks/train_throughput.py --out outputs/benchmarks
	$(BIN)/python benchmarks/run_io.py --out outputs/benchmarks
	$(BIN)/python benchmarks/import_time.py --out outputs/benchmarks

# README.md mirrors nbs/index.ipynb (no Quarto here for nbdev_readme)
readme: setup
	$(BIN)/python tools/readme_from_index.py

lab: setup
	$(BIN)/jupyter lab nbs/
