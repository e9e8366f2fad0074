# The targets CI runs; `make test` is the README's test command.
PYTHON ?= python3

.PHONY: install lint docs test test-rust test-python test-interop wheel test-installed

install:
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet ".[test]"
	# The benchmarks' native baselines, a module of their own (tests/test_bench.py runs them).
	$(PYTHON) -m pip install --quiet ./benches/baseline

lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	# The product as users build it: the core without the `harness` feature the fuzz targets and
	# the load generator turn on, so code only they use shows up as dead.
	cargo clippy -p rocketha-core -p rocketha-py --all-targets -- -D warnings
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy
	$(PYTHON) -m mypy.stubtest rocketha._core --allowlist stubtest-allowlist.txt
	# No dependency cycle between the modules of rust/core or of the Python package.
	$(PYTHON) tools/module_cycles.py

# The API reference from the docstrings (mkdocs.yml): strict, so a reference to a class or
# method that does not exist fails the build.
docs:
	$(PYTHON) -m mkdocs build --strict --quiet

test-rust:
	cargo test --workspace --exclude rocketha-py

# Four workers on two cores: most tests wait on brokers and JVMs more than they compute (on a
# 2-core VM the suite took 19 min on two workers, 12 on three and 10 on four). The tests
# against real JVMs (RocketMQ, Kafka) run a module at a time on any worker
# (tests/conftest.py), the Spark ones on one.
# (pytest is pinned below 9: pytest-xdist 3.8's loadgroup renames Item._nodeid, which pytest 9
# no longer reads, so every group would be spread over the workers.)
test-python:
	$(PYTHON) -m pytest -q --durations=15 -n 4 --dist loadgroup

# Only the tests against the real Apache RocketMQ (Java 17 + Maven; the harness resolves the
# jars on first use). `test-python` runs them too.
test-interop:
	$(PYTHON) -m pytest -q -m interop

test: install lint docs test-rust test-python

# The wheel a user installs: one abi3 wheel for CPython >= 3.11, manylinux (zig links against an
# old glibc, no container needed), checked by auditwheel; and the sdist that builds from source.
wheel:
	$(PYTHON) -m pip install --quiet "maturin>=1.7,<2" ziglang auditwheel
	rm -rf dist
	$(PYTHON) -m maturin build --release --zig --compatibility manylinux2014 --out dist
	$(PYTHON) -m maturin sdist --out dist
	$(PYTHON) -m auditwheel show dist/rocketha-*.whl

# The Python suite against the wheel as a user gets it: a fresh venv (its test dependencies come
# from this Python's site-packages), a PATH without cargo, run from outside the checkout so
# nothing resolves to the source tree (`python/rocketha` is never on sys.path), then `rocketha demo`.
# The interop tests exercise Apache RocketMQ's JVMs beside ours; `make test` runs them once.
# On four workers as `make test` (run one after the other, the suite took longer than CI's
# budget left it).
INSTALLED := $(CURDIR)/build/venv-installed
test-installed: wheel
	rm -rf $(INSTALLED)
	$(PYTHON) -m venv --system-site-packages $(INSTALLED)
	$(INSTALLED)/bin/pip install --quiet --no-deps --force-reinstall dist/rocketha-*.whl
	cd /tmp && env PATH="$(INSTALLED)/bin:/usr/local/bin:/usr/bin:/bin" PYTHONPATH="$(CURDIR)" \
		$(INSTALLED)/bin/python -c "import rocketha, sys; \
		assert rocketha.__file__.startswith('$(INSTALLED)'), rocketha.__file__; \
		assert not [m for m in ('pyarrow', 'pyspark') if m in sys.modules], 'heavy import'"
	cd /tmp && env PATH="$(INSTALLED)/bin:/usr/local/bin:/usr/bin:/bin" PYTHONPATH="$(CURDIR)" \
		$(INSTALLED)/bin/python -m pytest -q -p no:cacheprovider -n 4 --dist loadgroup \
		--rootdir="$(CURDIR)" -c "$(CURDIR)/pyproject.toml" -m "not interop" "$(CURDIR)/tests"
	cd /tmp && env PATH="$(INSTALLED)/bin:/usr/local/bin:/usr/bin:/bin" $(INSTALLED)/bin/rocketha demo
