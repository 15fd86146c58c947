# Two commands on a fresh machine: `make lab` to present, `make test` to check.
# Everything installs into .venv from requirements.txt under constraints.txt.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export MPLBACKEND := Agg

.PHONY: help install test lab bench pins clean

help:
	@echo "make lab    - JupyterLab with RISE on 127.0.0.1 (token auth on), opened on notebooks/"
	@echo "make test   - install into .venv if needed; unit tests + strict nbval of every deck"
	@echo "make bench  - benchmark attention_utils against the book and PyTorch"
	@echo "make pins   - rewrite constraints.txt from the current .venv"

# Re-install only when what we install from changes.
$(STAMP): requirements.txt constraints.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python >= 3.10 needed, found " + sys.version.split()[0]'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt setuptools -c constraints.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

install: $(STAMP)

# Unit tests and strict nbval (every cell of every deck re-run and compared).
test: install
	$(PY) -m pytest --nbval tests notebooks

lab: install
	$(VENV)/bin/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks

bench: install
	$(PY) benchmarks/bench_attention.py

pins: install
	{ sed -n '1,3p' constraints.txt; $(PY) -m pip freeze --exclude-editable | sed 's/^torch==\(.*\)+cpu$$/torch==\1/'; \
	  $(PY) -m pip freeze --all | grep '^setuptools=='; } > constraints.new && mv constraints.new constraints.txt

clean:
	rm -rf $(VENV) build
