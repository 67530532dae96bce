# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates its own virtualenv (.venv) and installs what it needs.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
BIN    := .cache/bin

# The pinned binaries the tests, the benchmarks and the Helm examples use.
export COZYRENDER_HELM3   := $(abspath $(BIN)/helm3)
export COZYRENDER_HELM4   := $(abspath $(BIN)/helm4)
export COZYRENDER_KUBECTL := $(abspath $(BIN)/kubectl)

.PHONY: venv binaries demo test bench clean

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench]' --config-settings editable_mode=compat
	touch $@

binaries: $(BIN)/.fetched
$(BIN)/.fetched: tools/fetch_binaries.py | $(VENV)/.installed
	$(PY) tools/fetch_binaries.py $(BIN)
	touch $@

demo: venv
	$(PY) -m cozyrender.demo

test: venv binaries
	$(PY) -m pytest

bench: venv binaries
	$(PY) -m compileall -q cozyrender
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .cache build *.egg-info
