# The targets CI runs; `make test` is the README's test command.
PYTHON ?= python3

.PHONY: install lint test test-rust test-python

install:
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet ".[test]"
	# The benchmarks' native baselines, a module of their own (tests/test_bench.py runs them).
	$(PYTHON) -m pip install --quiet ./benches/baseline

lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy
	$(PYTHON) -m mypy.stubtest rocketha._core --allowlist stubtest-allowlist.txt

test-rust:
	cargo test --workspace --exclude rocketha-py

test-python:
	$(PYTHON) -m pytest -q

test: install lint test-rust test-python
