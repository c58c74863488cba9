# The course's two commands:
#   make lab    create .venv/ if missing, install the project, start JupyterLab on the course
#   make test   create .venv/ if missing, run the whole test suite
#   make test-fast  lint, type checks and the unit tests (no sandbox, slow, browser or nbval tests)
# Both first install the Debian packages they need (system-packages.txt) when that needs no
# password (root, or passwordless sudo); otherwise `make test` stops at once with the exact
# apt-get command to run, and `make lab` says which feature needs it and starts anyway.
# Everything is installed with pip from pyproject.toml (direct pins) constrained by
# requirements.lock (the whole tree pinned), with the `dev` extra (ruff, mypy, pytest-xdist).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=
# make test: pytest-xdist workers (2, the cores of the reference machine; 0: one process). A module's
# tests, and a notebook's cells, stay on one worker (--dist loadscope; tests/conftest.py, FIRST).
TEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder)
LAB_ARGS ?=
BENCH_ARGS ?= --n 60

# JupyterLab refuses to run as root without --allow-root (containers, CI machines).
# nbgrader looks for `alembic`, jupyter for kernels, on PATH: use the venv's first.
export PATH := $(CURDIR)/$(BIN):$(PATH)

ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
START_PAGE ?= lab/tree/course/00_start_here.ipynb
LAB_ROOT ?= $(CURDIR)

.PHONY: site bench-report bench-scale bench-serve fuzz lab test test-fast test-under-load lint typecheck test-browser system-packages-test system-packages-lab venv nbval notebooks exercises lock bench clean help

help:
	@echo "make lab      - install (first time) and start JupyterLab on the course (LAB_ARGS=...)"
	@echo "make test     - install (first time) and run every test, on TEST_WORKERS=2 processes (PYTEST_ARGS=...)"
	@echo "make test-fast - ruff, mypy and the unit tests (-m '$(FAST_MARKERS)'), in under 2 minutes"
	@echo "make lint     - ruff check, and ruff format --check of the files already formatted"
	@echo "make typecheck- mypy on the packages named in pyproject.toml [tool.mypy]"
	@echo "make test-under-load - make test on a fresh clone of HEAD with 2 CPU burners per core (UNDER_LOAD_ARGS=--runs 3)"
	@echo "make test-browser - the student's path in a real browser (Debian chromium), screenshots in artifacts/browser/"
	@echo "make site     - the course as a website in build/site/html (Sphinx, myst-nb), checked for hidden content"
	@echo "make nbval    - strict nbval of course/ and solutions/ only"
	@echo "make notebooks- re-execute course/ and solutions/ notebooks, then regenerate exercises/"
	@echo "make exercises- regenerate exercises/ from solutions/ with nbgrader"
	@echo "make lock     - rewrite requirements.lock from the installed .venv"
	@echo "make fuzz     - differential fuzz vs stock nbgrader (FUZZ_ARGS=--n 50 --seed 1), report in artifacts/fuzz/"
	@echo "make bench    - autograder grade vs stock nbgrader autograde on N submissions (BENCH_ARGS=--n 60)"
	@echo "make bench-scale - autograder grade on 60, 600 and 3,000 submissions, 5% looping (SCALE_ARGS=...)"
	@echo "make bench-report - autograder report on a synthetic class of 4,000 notebooks (REPORT_BENCH_ARGS=...)"
	@echo "make bench-serve - autograder serve: submit-to-feedback p50/p95, a burst, kill -9 mid-burst"

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version' \
		|| { echo "Set PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --constraint requirements.lock --editable '.[dev,serve]'
	touch $(STAMP)

# LAB_ROOT: the folder JupyterLab serves (and where nbgrader's formgrader reads nbgrader_config.py).
# The terminal runs the user's shell as a non-login shell, so it keeps the PATH above and
# `autograder check` works there (a login shell would reset PATH from /etc/profile).
lab: system-packages-lab $(STAMP)
	cd "$(LAB_ROOT)" && "$(CURDIR)/$(BIN)/jupyter" lab --ServerApp.root_dir="$(LAB_ROOT)" \
		--LabApp.default_url=/$(START_PAGE) \
		--ServerApp.terminado_settings=shell_command="$${SHELL:-/bin/sh}" $(ROOT_FLAG) $(LAB_ARGS)

# Stock nbgrader's grades of the fixtures, the fixture courses and the fuzzer's fixed budget come
# from tests/fixtures/stock/ when nothing they depend on changed (tests/stock_memo.py);
# AUTOGRADER_STOCK_MEMO=0 make test runs nbgrader on all of them.
test: system-packages-test $(STAMP)
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

# `make test` as CI runs it, on a busy machine: a fresh clone of HEAD, CPU burners holding the load
# average at twice the core count or more (tests/under_load.py; logs in artifacts/under-load/).
UNDER_LOAD_ARGS ?= --runs 1
test-under-load:
	$(PYTHON) -m tests.under_load $(UNDER_LOAD_ARGS)

# The unit tests: tests/ without the markers below (pyproject.toml registers them; tests/conftest.py
# says which tests carry them), so no grading sandbox, no browser, no notebook run by nbval.
FAST_MARKERS := not sandbox and not slow and not browser
test-fast: lint typecheck $(STAMP)
	$(BIN)/python -m pytest tests -m "$(FAST_MARKERS)" $(PYTEST_ARGS)

# The format check covers the whole tree (pyproject.toml's [tool.ruff.format] names what it skips).
FORMATTED := .
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check $(FORMATTED)

typecheck: $(STAMP)
	$(BIN)/mypy

test-browser: system-packages-test $(STAMP)
	$(BIN)/python -m pytest tests/test_browser.py $(PYTEST_ARGS)

# system-packages.txt: bubblewrap (the grading sandbox) and chromium (the browser test)
system-packages-test:
	@./system-packages.sh test

# JupyterLab runs without bubblewrap; only `check(hidden=True)` / `autograder check --hidden` need it
system-packages-lab:
	@./system-packages.sh lab --warn

nbval: $(STAMP)
	$(BIN)/python -m pytest course solutions $(PYTEST_ARGS)

notebooks: $(STAMP)
	$(BIN)/python -m autograder.authoring.notebooks execute $(wildcard course/*.ipynb) $(wildcard solutions/*/*.ipynb)
	$(MAKE) exercises

exercises: $(STAMP)
	@for d in solutions/*/; do a=$$(basename $$d); \
		$(BIN)/nbgrader generate_assignment $$a --force --no-db --log-level=WARN || exit 1; done

lock: $(STAMP)
	{ sed -n '1,2p' requirements.lock; $(BIN)/python -m pip freeze --exclude-editable \
		| sed 's/+cpu$$//' | grep -v -E '^(pip|setuptools)=='; } > requirements.lock.new
	mv requirements.lock.new requirements.lock

# The differential fuzzer's long run (issue 26 item 5): generated honest and hostile courses
# graded by `autograder grade` and by stock `nbgrader autograde`, compared cell for cell.
FUZZ_ARGS ?= --n 50 --seed 1
fuzz: system-packages-test $(STAMP)
	$(BIN)/python -m tests.fuzz $(FUZZ_ARGS)

bench: $(STAMP)
	$(BIN)/python -m autograder.authoring.bench $(BENCH_ARGS)

REPORT_BENCH_ARGS ?= --notebooks 4000
bench-scale: $(STAMP)
	$(BIN)/python -m autograder.authoring.bench_scale $(SCALE_ARGS)

bench-report: $(STAMP)
	$(BIN)/python -m autograder.authoring.bench_report $(REPORT_BENCH_ARGS)

# autograder serve: submit -> feedback times, a burst, a kill -9 mid-burst (figures in artifacts/)
BENCH_SERVE_ARGS ?=
bench-serve: system-packages-test $(STAMP)
	$(BIN)/python -m autograder.authoring.serve_bench $(BENCH_SERVE_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache

# The course as a website: static HTML in build/site/html (docs/conf.py: Sphinx with myst-nb;
# the lessons' committed outputs, never executed again), then a search of the whole output for
# anything hidden (a hidden test's or a solution's line, a gradebook). tests/test_site.py does the same.
site: $(STAMP)
	$(BIN)/python -m autograder.authoring.site build/site
