# The newest Python 3.11+ on PATH (python3.13, python3.12, python3.11, then python3), found only
# when a recipe needs it; `make test PY=/path/to/python` picks another.
PY ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
	  $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && \
	  { command -v $$p; break; }; done)
NO_PY := echo "no Python 3.11+ found (tried python3.13, python3.12, python3.11, python3): pass PY=/path/to/python" >&2; exit 1
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The library alone (its one dependency), for the demo; the full toolchain implies it
LIB_STAMP := $(VENV)/.installed-lib

.PHONY: demo test test-browser lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || { test -n "$(PY)" || { $(NO_PY); }; $(PY) -m venv $(VENV); }
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(LIB_STAMP): pyproject.toml
	test -x $(BIN)/python || { test -n "$(PY)" || { $(NO_PY); }; $(PY) -m venv $(VENV); }
	test $(STAMP) -nt pyproject.toml || $(BIN)/pip install --quiet -e .
	touch $(LIB_STAMP)

demo: $(LIB_STAMP)
	$(BIN)/python examples/approval_demo.py start
	$(BIN)/python examples/approval_demo.py resume approve

# Debian's Chromium, which the browser tests (tests/web) drive with Playwright: installed with
# apt-get when /usr/bin/chromium is missing and apt-get is there (as root, or through sudo).
test-browser:
	@test -x /usr/bin/chromium || ! command -v apt-get >/dev/null 2>&1 || { \
	  SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  echo "installing chromium for the browser tests (apt-get)"; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

test: $(STAMP) test-browser
	$(BIN)/ruff check threadline tests examples
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check threadline tests examples
	$(BIN)/python -m mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache

# Benchmarks: threadline vs LangGraph 1.2.22 side by side, in one process (see docs/performance.md).
# The peer venv holds both libraries; its packages are reinstalled when pyproject.toml changes.
# `make bench BENCH_ARGS=--quick` for a 1-minute smoke run. Then the server's cases (bench/server.py:
# runs/s and latency over HTTP, in-process on SQLite and with 1-3 workers on PostgreSQL).
.PHONY: bench
bench:
	test -x bench/.venv-peer/bin/python || { test -n "$(PY)" || { $(NO_PY); }; \
	  $(PY) -m venv bench/.venv-peer; }
	test bench/.venv-peer/.installed -nt pyproject.toml || { \
	  bench/.venv-peer/bin/pip install --quiet --upgrade pip && \
	  bench/.venv-peer/bin/pip install --quiet langgraph==1.2.22 \
	    langgraph-checkpoint-sqlite==3.1.2 langgraph-checkpoint-postgres==3.2.0 \
	    'psycopg[binary,pool]>=3.2,<4' 'redis>=5,<9' -e '.[workers]' && \
	  touch bench/.venv-peer/.installed; }
	bench/.venv-peer/bin/python -m bench.run $(BENCH_ARGS)
	bench/.venv-peer/bin/python -m bench.server $(filter --quick,$(BENCH_ARGS))

# LangGraph compat corpus: record what LangGraph itself prints for tests/compat/programs/*.py
# (see tests/compat/README.md). LangGraph lives only in .venv-lg.
.PHONY: compat-record
compat-record:
	test -x .venv-lg/bin/python || $(PY) -m venv .venv-lg
	test .venv-lg/.installed -nt Makefile || { \
	  .venv-lg/bin/pip install --quiet --upgrade pip && \
	  .venv-lg/bin/pip install --quiet langgraph==1.2.22 langgraph-checkpoint-sqlite==3.1.2 \
	    langgraph-checkpoint-postgres==3.2.0 'langchain-core>=1,<2' \
	    'pydantic>=2.5,<3' 'psycopg[binary,pool]>=3.2,<4' && \
	  touch .venv-lg/.installed; }
	.venv-lg/bin/python tests/compat/record.py --python .venv-lg/bin/python $(COMPAT_ARGS)

# The refund agent (examples/refund_agent.py): a refund waits for a person, who approves it from
# another process. `make agent-demo DECISION="reject 'Outside the return window.'"` decides otherwise.
.PHONY: agent-demo
DECISION ?= approve
agent-demo: $(STAMP)
	$(BIN)/python examples/refund_agent.py start
	$(BIN)/python examples/refund_agent.py resume $(DECISION)

# The server (docs/server.md): `threadline serve` on SQLite, a client that answers a refund over
# HTTP with langgraph-sdk, then a second refund left waiting while it keeps serving (Ctrl-C).
.PHONY: serve-demo
serve-demo: $(STAMP)
	$(BIN)/python examples/server/demo.py

# Kill harness soak: thousands of SIGKILLs on every saver, each run continued in fresh processes
# and checked (see docs/durability.md, "Kill harness"). `make soak SOAK_ARGS="--trials 100"`.
# `make soak SOAK_ARGS=--server`: the scale-out soak instead (API server, three workers on
# PostgreSQL, workers SIGKILLed mid-step; docs/server.md, "Workers and the queue").
.PHONY: soak
soak: $(STAMP)
	$(BIN)/python -m bench.kill_soak $(SOAK_ARGS)
