# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-unit lint docs bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/durable-agents demo

# -P: the repository root is never on sys.path, so only the installed
# `durable_agents.*` names are importable (not the bare folder names).
test: $(STAMP)
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-chromium.sh
	bash scripts/ensure-node-client.sh
	PYTHON=$(PYTHON) bash scripts/ensure-llama-server.sh
	$(BIN)/python -P -m pytest -q --durations=25

test-unit: $(STAMP)
	$(BIN)/python -P -m pytest -q -m unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHON=$(BIN)/python bash scripts/typecheck.sh
	$(BIN)/python -P -m pytest -q tests/test_layering.py   # dependencies point one way (docs/design.md §1)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# the docs site, served locally (http://127.0.0.1:8000); nothing is fetched
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]' || echo "bench extra not installed: compare.py runs without Pydantic AI"
	$(BIN)/python bench/compare.py --steps 30 --rounds 5 --sessions 20
	$(BIN)/python bench/long_session.py --steps 2000
	$(BIN)/python bench/step_overhead.py --steps 30 --runs 3
	$(BIN)/python bench/concurrency.py --sessions 20 --steps 30
	$(BIN)/python bench/history_storage.py
	$(BIN)/python bench/fork_compare.py
	$(BIN)/python bench/anthropic_caching.py

clean:
	rm -rf $(VENV) .venv-llama .durable-agents
