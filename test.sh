#!/usr/bin/env bash
# The test command: installs what it needs (idempotent), then runs the linters,
# the native crates' own tests, and the Python tests (unit: no root;
# integration: root + network namespaces). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$HOME/.cargo/bin:$PATH"
echo "== ruff"
ruff check .
echo "== cargo test (native core)"
cargo test --release --quiet --locked 2>&1 | grep -E "^(test result|error|warning: unused)" || true
cargo test --release --quiet --locked >/dev/null 2>&1
echo "== pytest"
exec python -m pytest -p no:cacheprovider --timeout=900 "$@" tests
