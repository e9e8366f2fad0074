# The targets CI runs; `make test` is the README's test command.
PYTHON ?= python3

.PHONY: install lint test test-rust test-python test-interop

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

# Only the tests against the real Apache RocketMQ (Java 17 + Maven; the harness resolves the
# jars on first use). `test-python` runs them too.
test-interop:
	$(PYTHON) -m pytest -q -m interop

test: install lint test-rust test-python
