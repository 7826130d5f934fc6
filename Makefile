# Two commands do all the set-up: `make demo` and `make test` (see README.md).
SHELL := /bin/bash
VENV  := .local/venv
PY    := $(VENV)/bin/python

.PHONY: setup test test-unit lint format demo clean

setup:            ## install what is missing (venv, Java, Iceberg jars) into .local/
	@scripts/setup-local

lint: setup       ## ruff
	@$(VENV)/bin/ruff check glue_scripts tests scripts
	@$(VENV)/bin/ruff format --check glue_scripts tests

format: setup
	@$(VENV)/bin/ruff format glue_scripts tests
	@$(VENV)/bin/ruff check --fix glue_scripts tests

test: setup lint  ## every test
	@$(PY) -m pytest $(PYTEST_ARGS)

clean:            ## remove local state (keeps the venv and jars)
	rm -rf .local/warehouse .local/tmp
