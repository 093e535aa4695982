#!/usr/bin/env bash
# The test command: installs what it needs (idempotent), then runs the linter,
# the native crates' own tests, and the Python tests (unit: no root;
# integration: root + network namespaces). Extra arguments go to pytest.
# Fails when any layer fails; pytest's "no tests ran" (exit 5) fails too.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$HOME/.cargo/bin:$PATH"
echo "== ruff"
ruff check .
echo "== ansible-lint (testbed playbooks)"
(cd ansible && ansible-lint --nocolor -q .)
echo "== cargo test (native core)"
cargo test --release --locked --quiet 2>&1 | grep -Ev "^\s*$|^running 0 tests|Running|Doc-tests"
echo "== pytest"
exec python -m pytest -p no:cacheprovider --timeout=900 "$@" tests
