# Stapel: `make run` starts everything with a translated demo; `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
PROCESSES ?= web worker_control beat flower autoscaler demo

# `make chromium` installs the browser the Flower test drives (Debian, as root).
.PHONY: chromium install migrate run test bench bench-model clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

install: $(VENV)/.installed

migrate: install
	$(BIN)/alembic upgrade head

# `make run` writes stapel.log, stapel.log.wf and stapel.tracer here (tests write none).
run: export STAPEL_LOG_DIR ?= $(CURDIR)/var/log

run: migrate
	$(BIN)/python -m app.embedded_redis ensure
	$(BIN)/honcho start $(PROCESSES)

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install
	$(BIN)/python -m bench.throughput --name cpu $(BENCH_ARGS)

clean:
	rm -rf var .cache

chromium:
	command -v chromium || apt-get install -y chromium
