#!/usr/bin/env bash
# Runs every fuzz target for a fixed budget each: fuzz/run.sh [SECONDS] (default 60).
# Crashes land in fuzz/artifacts/<target>/; the growing corpus in fuzz/corpus/<target>/.
set -euo pipefail
cd "$(dirname "$0")"
budget="${1:-60}"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz
fi
# cargo-fuzz passes nightly-only flags (-Zsanitizer=address); RUSTC_BOOTSTRAP lets the stable
# toolchain accept them, so no second toolchain is needed.
export RUSTC_BOOTSTRAP=1
for target in $(cargo fuzz list); do
    echo "== $target: ${budget}s"
    # Debug assertions on: overflow checks and the decoder's debug_asserts are part of the oracle.
    cargo fuzz run --debug-assertions "$target" -- \
        -max_total_time="$budget" -print_final_stats=1
done
