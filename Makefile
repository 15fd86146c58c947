# Two commands on a fresh machine: `make lab` to present, `make test` to check.
# Everything installs into .venv from requirements.txt under constraints.txt.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# Slides (make slides / screenshots / lab). NOTEBOOKS can point at another folder of decks.
NOTEBOOKS    ?= notebooks
SLIDES_OUT   ?= build/slides
HANDOUTS_OUT ?= build/handouts
DECK         ?=
NPM_STAMP    := node_modules/.package-lock.json
SUDO         := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: help install test lab bench pins clean slides handouts screenshots browser execute

help:
	@echo "make lab    - JupyterLab on 127.0.0.1 with the live presenter, serving a working copy in build/lab/; prints the URL with its token"
	@echo "make test   - install into .venv if needed; unit tests + strict nbval of every deck"
	@echo "make slides - offline HTML decks + course index in build/slides/ (needs npm)"
	@echo "make handouts - PDF handouts in build/handouts/: one slide per page, and a copy with speaker notes"
	@echo "make screenshots [DECK=02_nadaraya_watson] - PNG of every slide in build/screenshots/<deck>/"
	@echo "make execute [DECK=02_nadaraya_watson] - re-run decks top to bottom and store their outputs"
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

# Unit tests and strict nbval (every cell of every deck re-run and compared), on
# two workers; --dist loadfile keeps each notebook's cells on one kernel. The two
# halves of the live lectures (the longest files) go first, one to each worker,
# in the order given here (--no-loadscope-reorder), and the rest fills in.
# The browser tests (tests/test_slides.py, tests/test_live.py, tests/test_handouts.py)
# need the built decks and handouts, chromium and poppler.
test: install slides browser handouts
	SLIDES_TESTS_REQUIRED=1 $(PY) -m pytest --durations=12 --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg -n 2 --dist loadfile --no-loadscope-reorder \
	  tests/test_live.py tests/test_live_more.py tests notebooks

# slides/lab.py: a working copy of the decks in build/lab/ (presenting never
# writes notebooks/), a fresh random token on every start, and the full URL printed.
lab: install
	$(PY) slides/lab.py

# ---- Slides: offline HTML decks, screenshots, browser ----

$(NPM_STAMP): package.json package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "make slides: npm not found. The offline decks need reveal.js and MathJax from npm;" \
	  "install Node.js with npm (Debian/Ubuntu: sudo apt-get install npm; otherwise https://nodejs.org), then re-run make slides." >&2; exit 1; }
	npm ci --no-audit --no-fund
	@touch $@

# Rebuilt only when a deck or what builds it changed, so a repeat `make test` stays quick.
SLIDES_INDEX := $(SLIDES_OUT)/index.html
slides: $(SLIDES_INDEX)

$(SLIDES_INDEX): $(STAMP) $(NPM_STAMP) $(wildcard $(NOTEBOOKS)/*.ipynb) \
                 slides/build.py slides/reveal-settings.json slides/course.css $(wildcard slides/templates/*/*)
	$(PY) slides/build.py --notebooks $(NOTEBOOKS) --out $(SLIDES_OUT)
	@touch $@

# PDF handouts, printed from the offline decks by the same Chromium; rebuilt only
# when the decks or the printer changed.
HANDOUTS_STAMP := $(HANDOUTS_OUT)/.built
handouts: $(HANDOUTS_STAMP)

$(HANDOUTS_STAMP): $(SLIDES_INDEX) slides/handouts.py slides/browser.py | browser
	$(PY) slides/handouts.py --slides $(SLIDES_OUT) --out $(HANDOUTS_OUT)
	@touch $@

screenshots: slides browser
	$(PY) slides/screenshots.py --slides $(SLIDES_OUT) $(DECK)

# Debian's chromium, a CJK font (so Chinese renders) and poppler (the handout
# tests read the PDFs with it), each only where missing.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium for the browser tests"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk poppler-utils; }
	@fc-list :lang=zh 2>/dev/null | grep -q . || { $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk; }
	@command -v pdftoppm >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq poppler-utils; }

# Stored outputs come from one clean top-to-bottom run. Widget state is not
# stored: an interactive figure's live widget is rebuilt when the cell runs.
execute: install
	cd $(NOTEBOOKS) && for nb in $(if $(DECK),$(DECK).ipynb,[0-9][0-9]_*.ipynb); do \
	  echo "  $$nb"; $(abspath $(VENV))/bin/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.store_widget_state=False --log-level=WARN "$$nb" || exit 1; \
	  $(abspath $(PY)) -c 'import nbformat, sys; nb = nbformat.read(sys.argv[1], 4); \
	    nb.metadata.pop("widgets", None); nbformat.write(nb, sys.argv[1])' "$$nb"; done

bench: install
	$(PY) benchmarks/bench_attention.py

pins: install
	{ sed -n '1,3p' constraints.txt; $(PY) -m pip freeze --exclude-editable | sed 's/^torch==\(.*\)+cpu$$/torch==\1/'; \
	  $(PY) -m pip freeze --all | grep '^setuptools=='; } > constraints.new && mv constraints.new constraints.txt

clean:
	rm -rf $(VENV) build
