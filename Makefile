# `make run` and `make test` work on a fresh machine: they install what they need first.
PYTHON ?= python3
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
UV_VERSION := 0.13.9

.PHONY: install system-deps bench-deps run test lint typecheck bench dist clean

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# Bytecode is compiled here, once: with PYTHONDONTWRITEBYTECODE set (as on this machine)
# Python would otherwise compile every module again at each start (~0.6 s of the broker's).
# Two installs: `make run` the base (no extras, no dev tools: only the build group, the
# compiler build_native.py uses), inexact so that it removes nothing a developer installed;
# `make test` everything (every extra and the dev group).
$(VENV)/.synced-run: $(UV) pyproject.toml uv.lock
	$(UV) sync --frozen --inexact --compile-bytecode --python $(PYTHON) --no-default-groups --group build
	touch $@

$(VENV)/.synced-all: $(UV) pyproject.toml uv.lock
	$(UV) sync --frozen --compile-bytecode --python $(PYTHON) --all-extras
	touch $@ $(VENV)/.synced-run

# The hot modules compiled with mypyc (build_native.py; plain Python where there is no C
# compiler). Any source change rebuilds them: a compiled module would shadow its newer source.
$(VENV)/.native: $(VENV)/.synced-run build_native.py $(shell find src -name '*.py')
	$(VENV)/bin/python build_native.py
	touch $@

install: $(VENV)/.native
	$(VENV)/bin/python -m compileall -q src

# Debian packages the tests need: a PostgreSQL server for the SQL store's tests, and
# ActiveMQ 5.17 (the Java client jars for the JMS suite, and the real broker it also runs on);
# Chromium for the console's browser tests.
APT_PACKAGES :=
ifeq ($(shell command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && echo yes),)
APT_PACKAGES += postgresql
endif
ifeq ($(wildcard /usr/share/activemq/lib/activemq-client.jar),)
APT_PACKAGES += activemq
endif
ifeq ($(shell command -v javac),)
APT_PACKAGES += default-jdk-headless
endif
ifeq ($(shell command -v gcc),)
APT_PACKAGES += gcc
endif
ifeq ($(wildcard /usr/bin/chromium),)
APT_PACKAGES += chromium
endif
# ZooKeeper for the replicated LevelDB store's tests (a server on loopback started by the tests).
ifeq ($(wildcard /usr/share/zookeeper/bin/zkServer.sh),)
APT_PACKAGES += zookeeper
endif
# RabbitMQ 3.10 with its STOMP plugin: the benchmark's second peer, and the tests of the
# harness that drive it.
ifeq ($(shell command -v rabbitmq-server),)
APT_PACKAGES += rabbitmq-server
endif

system-deps:
ifneq ($(strip $(APT_PACKAGES)),)
	@echo "installing with apt-get:$(APT_PACKAGES)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES) >/dev/null
endif

bench-deps: system-deps

# make run CONFIG=path/to/dovecote.toml: the broker with that configuration;
# EXTRAS="leveldb postgresql": with those extras installed too (pyproject.toml lists them).
CONFIG ?=
EXTRAS ?=
run: install
ifneq ($(strip $(EXTRAS)),)
	$(UV) sync --frozen --inexact --no-default-groups --group build $(foreach extra,$(EXTRAS),--extra $(extra))
endif
	$(VENV)/bin/dovecote broker $(if $(CONFIG),--config "$(CONFIG)")

lint: $(VENV)/.synced-all install
	$(VENV)/bin/ruff check src tests bench examples build_native.py build_dist.py hatch_build.py
	$(VENV)/bin/ruff format --check src tests bench examples build_native.py build_dist.py hatch_build.py

typecheck: $(VENV)/.synced-all install
	$(VENV)/bin/mypy

test: system-deps $(VENV)/.synced-all install lint typecheck
	$(VENV)/bin/pytest

# dovecote and ActiveMQ 5.17 side by side (short form, a few minutes); the Markdown table goes
# to bench/RESULTS.md. `$(VENV)/bin/python bench/harness.py --full` runs the issue's sizes.
bench: bench-deps $(VENV)/.synced-all install
	$(VENV)/bin/python bench/harness.py --repeat 3 --out bench/RESULTS.md

# dist/: an sdist, a pure-Python wheel (any platform), and a wheel with the mypyc-compiled
# modules for this interpreter and platform (pip prefers it where it fits). Built from a copy
# of the sources in a temporary directory: no .so file is left in src/.
dist: $(VENV)/.synced-run
	$(VENV)/bin/python build_dist.py --uv $(UV) --out dist

clean:
	rm -rf $(TOOLS) $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
	find src -name '*.so' -delete
