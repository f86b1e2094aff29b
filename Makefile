# Two commands set everything up on a fresh machine with Python >= 3.11:
#   make serve   install (once) and serve the models in weights/ on port 8000
#   make fetch   install (once) and download Hub models (MODELS=...) into $MT_WEIGHTS_DIR
#   make test    install (once, with the dev extra) and run ruff, mypy + the whole test suite
# Every install takes the versions pinned in requirements.lock; `make lock` refreshes it.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
LOCK   := requirements.lock
# the address `make serve` listens on: HOST=/PORT=, else MT_HOST/MT_PORT, else all addresses, 8000;
# HOST only from make's command line (`make serve HOST=::1`): an exported HOST is the machine's
# name in some shells (tcsh)
ifneq ($(origin HOST),command line)
HOST   := $(or $(MT_HOST),0.0.0.0)
endif
PORT   ?= $(or $(MT_PORT),8000)
UV_VERSION ?= 0.13.8
# Extra options for `uv pip compile`, e.g. LOCK_ARGS=--upgrade for the newest releases allowed.
LOCK_ARGS ?=

.PHONY: help serve fetch test lint format install install-dev browser fonts bench lock clean

# The first target: `make` alone lists the others.
help:
	@echo 'make serve        install (once) and serve weights/ (MT_WEIGHTS_DIR) on 0.0.0.0:8000 (HOST=, PORT=)'
	@echo 'make fetch        install (once) and download Hub models (MODELS=...) into $$MT_WEIGHTS_DIR'
	@echo 'make test         install (once, with the dev extra) and run ruff, mypy + the whole test suite'
	@echo 'make lint         ruff check, ruff format --check and mypy (app, model_core)'
	@echo 'make format       apply ruff'"'"'s fixes and formatting'
	@echo 'make bench        install the bench extra and run the engine benchmark'
	@echo 'make browser      install Chromium and chromedriver (apt) for tests/test_web.py, if missing'
	@echo 'make fonts        install the fonts (apt) a translated PDF is drawn in, if missing'
	@echo 'make install      install into $(VENV) (install-dev: with the dev extra)'
	@echo 'make lock         refresh requirements.lock from PyPI (LOCK_ARGS=--upgrade: newest)'
	@echo 'make clean        remove $(VENV) and the tools'"'"' caches'

# The stamp files make a re-run skip the install when nothing it depends on changed.
# The lock is a constraints file: each install takes its pinned versions of what it needs.
# The C kernels are built with the locked setuptools (no isolated build environment).
$(VENV)/.installed: pyproject.toml setup.py $(LOCK) model_core/_kernels.c
	@echo "installing into $(VENV) (the first time takes minutes: torch is large)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c $(LOCK) setuptools
	$(PIP) install -q -c $(LOCK) --no-build-isolation -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP) install -q -c $(LOCK) --no-build-isolation -e '.[dev]'
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

serve: $(VENV)/.installed
	MT_HOST=$(HOST) MT_PORT=$(PORT) $(VENV)/bin/mt-serve

# Download Hugging Face Hub models (OPUS-MT) into $MT_WEIGHTS_DIR (default weights/):
#   MT_WEIGHTS_DIR=opus-mt make fetch MODELS="Helsinki-NLP/opus-mt-en-de Helsinki-NLP/opus-mt-de-en"
fetch: $(VENV)/.installed
	@test -n "$(MODELS)" || { echo 'name the models: make fetch MODELS="Helsinki-NLP/opus-mt-en-de"' >&2; exit 2; }
	$(VENV)/bin/mt-fetch $(MODELS)

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy app model_core

format: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The web page's test (tests/test_web.py) drives Debian's headless Chromium through chromedriver.
# Installed only when missing: where both are on PATH this runs no apt command at all.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$sudo apt-get update -q && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	else \
		echo "tests/test_web.py needs chromium and chromedriver on PATH; install them" >&2; \
		exit 1; \
	fi

# A translated .pdf's text is drawn in DejaVu, Chinese, Japanese and Korean in WenQuanYi Micro
# Hei (app/formats/pdf_draw.py; tests/test_pdf_format.py checks them). Installed when missing.
fonts:
	@if [ -f /usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf ] \
		&& [ -f /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ]; then :; \
	elif command -v apt-get >/dev/null; then \
		sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$sudo apt-get update -q && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			fonts-dejavu-core fonts-wqy-microhei; \
	else \
		echo "tests/test_pdf_format.py needs fonts-dejavu-core and fonts-wqy-microhei; install them" >&2; \
		exit 1; \
	fi

# pytest exits 5 when it collected nothing; that is a failure here, as is any other non-zero code.
test: lint browser fonts
	$(PY) -m pytest -q

bench: $(VENV)/.installed-dev
	$(PIP) install -q -c $(LOCK) --no-build-isolation -e '.[bench]'
	$(PY) -m bench.engine_bench

# Re-resolve requirements.lock from pyproject.toml (every extra) and constraints.txt, for every
# platform and Python >= 3.11, from PyPI. Versions already in the lock are kept unless
# pyproject.toml or constraints.txt rule them out (LOCK_ARGS=--upgrade takes the newest).
lock:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q uv==$(UV_VERSION)
	$(VENV)/bin/uv pip compile pyproject.toml --all-extras --universal --python-version 3.11 \
		-c constraints.txt --custom-compile-command 'make lock' --quiet -o $(LOCK) $(LOCK_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
