# Two commands set everything up on a fresh machine with Python >= 3.11:
#   make serve   install (once) and serve the models in weights/ on port 8000
#   make test    install (once, with the dev extra) and run ruff + the whole test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
HOST   ?= 0.0.0.0
PORT   ?= 8000

.PHONY: serve test lint format install install-dev bench clean

# The stamp files make a re-run skip the install when nothing it depends on changed.
$(VENV)/.installed: pyproject.toml setup.py constraints.txt model_core/_kernels.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c constraints.txt -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP) install -q -c constraints.txt -e '.[dev]'
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

serve: $(VENV)/.installed
	MT_HOST=$(HOST) MT_PORT=$(PORT) $(VENV)/bin/mt-serve

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# pytest exits 5 when it collected nothing; that is a failure here, as is any other non-zero code.
test: lint
	$(PY) -m pytest -q

bench: $(VENV)/.installed-dev
	$(PIP) install -q -c constraints.txt -e '.[bench]'
	$(PY) -m bench.engine_bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
