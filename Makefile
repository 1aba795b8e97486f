# hetplanner — run `make help` for the targets.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTHON := $(BIN)/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
export DJANGO_SETTINGS_MODULE ?= hetplanner.settings.local

.DEFAULT_GOAL := help
.PHONY: help setup run worker housekeeping beat test test-sqlite test-core lint format typecheck bench check-deploy clean

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

setup: $(STAMP) ## Create .venv, install, migrate and load the seed catalog
	$(PYTHON) manage.py migrate --noinput
	$(PYTHON) manage.py seed_catalog
	$(PYTHON) manage.py collectstatic --noinput --verbosity 0

run: setup ## Serve the dashboard on http://127.0.0.1:8000 with a Celery worker and the housekeeping worker (embedded defaults)
	$(PYTHON) manage.py runstack --host $(HOST) --port $(PORT)

worker: $(STAMP) ## Start one Celery worker for the jobs (add more on any host to scale out; CONCURRENCY=n)
	$(BIN)/celery -A hetplanner worker --queues hetplanner --loglevel=INFO --concurrency=$${CONCURRENCY:-2}

housekeeping: $(STAMP) ## Start the worker of the housekeeping queue (the reconcilers beat schedules)
	$(BIN)/celery -A hetplanner worker --queues housekeeping --concurrency 1 --loglevel=INFO --hostname housekeeping@%h

beat: $(STAMP) ## Start the scheduler of the run reconciler (exactly one per deployment)
	mkdir -p var
	$(BIN)/celery -A hetplanner beat --loglevel=INFO --schedule var/celerybeat-schedule

test: export DJANGO_SETTINGS_MODULE = hetplanner.settings.test
test: $(STAMP) ## Run the whole test suite (core, integration with a real worker, browser)
	$(BIN)/pytest --durations=20

test-sqlite: export DJANGO_SETTINGS_MODULE = hetplanner.settings.test
test-sqlite: $(STAMP) ## Run the Django-side tests on the embedded defaults (SQLite, filesystem broker); the core tests touch no database
	env -u DATABASE_URL -u REDIS_URL $(BIN)/pytest --ignore=tests/core --durations=20

test-core: $(STAMP) ## Run only the simulation-core tests (no database)
	$(BIN)/pytest tests/core

lint: $(STAMP) ## ruff lint + format check, mypy (core and Django layer, django-stubs), import contracts
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(STAMP) ## Apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: $(STAMP) ## mypy on the core and the Django layer (pyproject.toml lists what it leaves out)
	$(BIN)/mypy

bench: export DJANGO_SETTINGS_MODULE = hetplanner.settings.test
bench: $(STAMP) ## Run the benchmarks; writes .bench/results.json and prints a table
	PYTHONPATH=. $(BIN)/pytest benchmarks -p benchmarks.report --benchmark-only --benchmark-disable-gc -q

check-deploy: $(STAMP) ## manage.py check --deploy on production settings
	DJANGO_SETTINGS_MODULE=hetplanner.settings.production DJANGO_SECRET_KEY=$$(head -c 48 /dev/urandom | base64) \
	  DJANGO_ALLOWED_HOSTS=example.com $(PYTHON) manage.py check --deploy --fail-level WARNING

clean: ## Remove the virtualenv, caches and local state
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache .bench var staticfiles
