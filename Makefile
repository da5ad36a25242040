# Stapel: `make run` starts everything with a translated demo; `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
PROCESSES ?= web worker_control beat flower autoscaler demo

.PHONY: install migrate run test bench bench-model clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

install: $(VENV)/.installed

migrate: install
	$(BIN)/alembic upgrade head

run: migrate
	$(BIN)/python -m app.embedded_redis ensure
	$(BIN)/honcho start $(PROCESSES)

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install
	$(BIN)/python -m bench.throughput --name cpu $(BENCH_ARGS)

clean:
	rm -rf var .cache
