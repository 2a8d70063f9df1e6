# Everything runs from a local virtual environment (.venv), created on first use. The
# package is (re)installed only when pyproject.toml changes (stamp files). PYTHON names the
# interpreter that creates it (Python >= 3.11; `make demo PYTHON=python3.12`).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-fast test-slow lint clean-venv

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { echo "make: dreamerjax needs Python >= 3.11, which PYTHON=$(PYTHON) is not; run make PYTHON=python3.11 (or newer)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e '.[dev]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/dreamerjax demo

# Two pytest-xdist workers (one per core of the 2-core machine CI runs on); tests/conftest.py
# says how they share the compile cache and split the work. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist loadfile)

test: $(VENV)/.installed-dev
	$(BIN)/pytest -q $(XDIST)

# The quick tier for the edit-test loop: units, contracts, parity, one tiny end-to-end run.
test-fast: $(VENV)/.installed-dev
	$(BIN)/pytest -q -m fast $(XDIST)

# The slow tier (learning checks, long kill tests, large configs): not run by CI.
test-slow: $(VENV)/.installed-dev
	TEST_XLA=default $(BIN)/pytest -q -m slow $(XDIST)

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check dreamerjax tests benchmarks examples

clean-venv:
	rm -rf $(VENV)
