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

# Wheels of cozyrender's dependencies, for the wheel test's offline install into a fresh venv.
WHEELHOUSE := $(VENV)/wheelhouse
DIST       := dist
# Helm's own state for `make dist`, kept out of the user's home.
HELM_TMP   := $(abspath build/helm-home)

.PHONY: venv binaries wheelhouse demo test bench dist clean

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench,docs]' --config-settings editable_mode=compat
	touch $@

binaries: $(BIN)/.fetched
$(BIN)/.fetched: tools/fetch_binaries.py | $(VENV)/.installed
	$(PY) tools/fetch_binaries.py $(BIN)
	touch $@

wheelhouse: $(WHEELHOUSE)/.fetched
$(WHEELHOUSE)/.fetched: pyproject.toml | $(VENV)/.installed
	mkdir -p $(WHEELHOUSE)
	$(PY) -c "import tomllib; print('\\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > $(WHEELHOUSE)/requirements.txt
	$(PY) -m pip download -q -d $(WHEELHOUSE) -r $(WHEELHOUSE)/requirements.txt
	touch $@

# The Python wheel and sdist, the two charts as Helm chart archives with a
# repository index.yaml, and the Helm 4 plugin as an archive
# (`helm plugin install dist/helm-plugin/cozyrender-<version>.tgz --verify=false`: unsigned).
dist: venv binaries
	rm -rf $(DIST) $(HELM_TMP)
	$(PY) -m build --no-isolation --outdir $(DIST) .
	HELM_DATA_HOME=$(HELM_TMP)/data HELM_CONFIG_HOME=$(HELM_TMP)/config HELM_CACHE_HOME=$(HELM_TMP)/cache \
	  $(BIN)/helm4 package charts/tenant charts/cozystack-basics -d $(DIST)/charts
	HELM_DATA_HOME=$(HELM_TMP)/data HELM_CONFIG_HOME=$(HELM_TMP)/config HELM_CACHE_HOME=$(HELM_TMP)/cache \
	  $(BIN)/helm4 repo index $(DIST)/charts
	HELM_DATA_HOME=$(HELM_TMP)/data HELM_CONFIG_HOME=$(HELM_TMP)/config HELM_CACHE_HOME=$(HELM_TMP)/cache \
	  $(BIN)/helm4 plugin package plugins/cozyrender --sign=false -d $(DIST)/helm-plugin
	rm -rf $(HELM_TMP)

demo: venv
	$(PY) -m cozyrender.demo

test: venv binaries wheelhouse
	$(PY) -m pytest

bench: venv binaries
	$(PY) -m compileall -q cozyrender
	$(PY) bench/run.py

.PHONY: docs docs-update

# The docs site (MkDocs + Material, from the `docs` extra installed in the venv),
# built in strict mode: a broken link, a page missing from the nav or any
# warning fails it. The site goes to build/site.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir build/site

# Regenerate what the docs take from the code, then review the diff like code:
# the reference pages (commands, chart parameters, GPUClass CRD, error
# messages), the render-path diagram, and the output shown in the docs'
# `console` examples. The tests fail when any of them drifts.
docs-update: venv
	$(PY) tools/gen_docs_reference.py
	$(PY) tools/draw_render_path.py
	COZYRENDER_UPDATE_DOCS=1 $(PY) -m pytest -q tests/test_docs_examples.py

clean:
	rm -rf $(VENV) .cache build $(DIST) *.egg-info
