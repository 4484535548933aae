# Two commands do all set-up on a fresh clone (Python 3.11 or newer):
#   make lab    install into .venv if needed, then open JupyterLab on the collection, at notebooks/00_start_here.ipynb
#   make test   install into .venv if needed, then run the whole suite
# Another interpreter and its own venv: make test PY=python3.13 VENV=.venv-3.13
# Extra pytest arguments: make test PYTEST_ARGS="--ignore=tests/browser"
# Workers (pytest-xdist): make test WORKERS=0 runs the suite in one process, in order.
# Offline (a workshop room with no network): `make wheelhouse` where there is one, carry the
# folder over; while wheelhouse/ holds wheels, installs take them from it and never ask an index.
PY ?= python3
VENV ?= .venv
PYTEST_ARGS ?=
# The suite mostly waits on subprocesses, servers and kernels: 4 workers on 2 cores pay (about 6 minutes, against 8 on 2)
# (benchmarks/suite_cost.py; measured in the README's performance section).
WORKERS ?= 4
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WHEELHOUSE ?= wheelhouse
OFFLINE := $(if $(wildcard $(WHEELHOUSE)/*.whl),--no-index --find-links $(WHEELHOUSE))

.PHONY: lab test browser screenshot notebooks bench mutation clean-venv wheelhouse

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	@$(PY) -c 'pass' >/dev/null 2>&1 || { \
	  echo "There is no working Python called '$(PY)' here (not found, or it does not start). Name one that is installed, e.g. make PY=python3.11 $(MAKECMDGOALS)"; exit 1; }
	@$(PY) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { \
	  echo "Loop Katas needs Python 3.11 or newer, and '$(PY)' is $$($(PY) -c 'import platform; print(platform.python_version())'). Run it with another one, e.g. make PY=python3.11 $(MAKECMDGOALS)"; exit 1; }
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(if $(OFFLINE),@echo "installing from $(WHEELHOUSE)/ and asking no index")
	$(BIN)/python -m pip install -q $(OFFLINE) --upgrade pip
	$(BIN)/python -m pip install -q $(OFFLINE) -r requirements-dev.txt -e .
# configurable-http-proxy for tests/test_workshop_hub.py; a learner's `make lab` never needs it.
	@if command -v npm >/dev/null 2>&1; then \
	  npm install --silent --prefix $(VENV)/chp configurable-http-proxy@5.3.0 || echo "npm could not install configurable-http-proxy 5.3.0 into $(VENV)/chp: tests/test_workshop_hub.py needs it."; \
	else echo "npm not found: tests/test_workshop_hub.py needs configurable-http-proxy 5.3.0 (install Node.js and npm, then run make again)."; fi
	$(BIN)/jupyter trust notebooks/*.ipynb
	@touch $@

# The whole collection in the file browser, the start page open (src/loopkata/learner/lab.py; the
# browser stage of the suite starts its lab from the same code).
lab: $(STAMP)
	$(BIN)/python -m loopkata.learner.lab

# The suite: engine tests, every kata proven three ways, every notebook under nbval
# (conftest.py keeps its progress apart from the learner's, and each notebook on one worker).
test: $(STAMP)
	$(BIN)/pytest $(if $(filter-out 0,$(WORKERS)),-n $(WORKERS)) $(PYTEST_ARGS)

# Only the browser stage: every notebook run in JupyterLab in headless Chromium.
browser: $(STAMP)
	$(BIN)/pytest tests/browser

# The README's screenshot (docs/screenshot.png), taken by the browser stage's learner loop.
screenshot: $(STAMP)
	LOOPKATA_README_SCREENSHOT=1 $(BIN)/pytest tests/browser -k panel_turns_green

# Re-execute every notebook in place, storing outputs and widget state.
notebooks: $(STAMP)
	cd notebooks && for nb in *.ipynb; do LOOPKATA_STATE=$$(mktemp -d) ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace "$$nb" || exit 1; done
	$(BIN)/jupyter trust notebooks/*.ipynb

bench: $(STAMP)
	$(BIN)/python benchmarks/check_latency.py
	$(BIN)/python benchmarks/scan_speed.py
	$(BIN)/python benchmarks/guard_overhead.py

# The mutation score of every reference fix (an authoring step, like bench; never part of test or CI):
# make mutation KATA=15 WORKERS=2 runs one kata; without KATA, all 16.
mutation: $(STAMP)
	$(BIN)/python benchmarks/mutation_score.py $(if $(KATA),--kata $(KATA)) -n $(if $(filter-out 0,$(WORKERS)),$(WORKERS),1)
	$(BIN)/python -m loopkata.authoring.tables --write

# Every pinned wheel (and what installing the project needs) for this machine's Python and
# platform, into $(WHEELHOUSE)/: build it once per Python version the room uses.
wheelhouse:
	$(PY) -m pip download -q -d $(WHEELHOUSE) -r requirements-dev.txt pip "setuptools>=68" wheel
	@echo "$(WHEELHOUSE)/ holds $$(ls $(WHEELHOUSE)/*.whl | wc -l) wheels for $$($(PY) -c 'import platform; print("Python", platform.python_version(), platform.machine())')"

clean-venv:
	rm -rf $(VENV)
