# Everyday entry points. `make demo` and `make test` work on a fresh machine: both run setup first.
PY := .venv/bin/python

.PHONY: setup services services-down demo demo-zhihu test test-slow lint format bench

setup:
	@bash scripts/setup.sh

## Start Redis (127.0.0.1:6379) and Kafka (127.0.0.1:9092) in the background; prints the exports.
services: setup
	@$(PY) -m crawler.devservices up

services-down:
	@if [ -x $(PY) ]; then $(PY) -m crawler.devservices down; fi

## A real 2-node crawl of a local site into Kafka, with a summary; leaves nothing running.
demo: setup
	@$(PY) -m crawler.demo

## The zhihu spider on 2 nodes against the local Zhihu mock (no internet needed).
demo-zhihu: setup
	@$(PY) -m crawler.demo.zhihu

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

## Lint, type-check and run the tests against real Redis and Kafka: all but those marked slow
## (long fault scenarios, the wider conformance matrix); with CI=true the slow ones after them.
test: lint
	$(PY) -m pytest -m "not slow"
	@if [ "$${CI:-}" = true ]; then $(MAKE) --no-print-directory test-slow; fi

## The tests marked slow alone (CI runs them after the others).
test-slow: setup
	$(PY) -m pytest -m slow

## Every benchmark table of the README (tens of minutes); the docs workload needs python3.11-doc.
bench: setup
	@[ -f /usr/share/doc/python3.11/html/index.html ] || { s=; [ "$$(id -u)" = 0 ] || s=sudo; \
		$$s apt-get install -y -qq --no-install-recommends python3.11-doc >/dev/null; }
	$(PY) -m bench.throughput
	$(PY) -m bench.frontier
	$(PY) -m bench.kafka
	$(PY) -m bench.politeness
	$(PY) -m bench.dedup
	$(PY) -m bench.dedup --flat 100000
	$(PY) -m bench.frontier_load --seen-feed
	$(PY) -m bench.redis_profile
	$(PY) -m bench.layout_prototype
	$(PY) -m bench.frontier_cluster
	$(PY) -m bench.frontier_backlog
	$(PY) -m bench.node_memory
	$(PY) -m bench.write_interval

format: setup
	.venv/bin/ruff format .
	.venv/bin/ruff check --fix .
