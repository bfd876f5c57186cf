# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/durable-agents demo

test: $(STAMP)
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-chromium.sh
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/history_growth.py

clean:
	rm -rf $(VENV) .durable-agents
