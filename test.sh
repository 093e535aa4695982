#!/usr/bin/env bash
# The test command: installs what it needs (idempotent), then runs the linter,
# the native crates' own tests, the Python tests (unit: no root; integration:
# root + network namespaces) and the VM layer. Extra arguments go to pytest.
# Fails when any layer fails; pytest's "no tests ran" (exit 5) fails too.
#
# The VM layer (scripts/vmtest.sh): this kernel lacks sch_netem, so the
# netem-marked tests, skipped by the host's pytest, run again inside a QEMU
# guest booting Debian's stock kernel when this host can boot one (decided by
# trying, with time limits; skipped with the reason otherwise). It runs after a
# full run (no pytest arguments); SWELL_VM=0 leaves it out, SWELL_VM=1 runs it
# after a partial run too. Its pieces come from scripts/bootstrap-vm.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
scripts/bootstrap.sh
vm="${SWELL_VM:-$([ $# -eq 0 ] && echo 1 || echo 0)}"
vm_ready=1
if [ "$vm" = 1 ] && ! scripts/bootstrap-vm.sh; then
  vm_ready=0
fi
export PATH="$PWD/.venv/bin:$HOME/.cargo/bin:$PATH"
echo "== ruff"
ruff check .
echo "== ansible-lint (testbed playbooks)"
(cd ansible && ansible-lint --nocolor -q .)
echo "== cargo fmt --check (native core)"
if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --check
else
  echo "skipped: rustfmt is not installed with this cargo (rustup component add rustfmt)"
fi
echo "== cargo test (native core)"
cargo test --release --locked --quiet 2>&1 | grep -Ev "^\s*$|^running 0 tests|Running|Doc-tests"
echo "== pytest"
rc=0
mkdir -p out && rm -f out/pytest-junit.xml out/pytest-unit-junit.xml out/vmtest/junit.xml \
  out/pytest-reruns.txt
export SWELL_RERUN_LOG="$PWD/out/pytest-reruns.txt"
if [ $# -eq 0 ]; then
  # the integration tests one at a time (they measure real stacks and time), then
  # the unit tests (no root, no timing) on every core (pytest-xdist): 105 s
  # instead of 174 s on 2 cores
  python -m pytest -p no:cacheprovider --timeout=900 --junitxml=out/pytest-junit.xml \
    tests/integration || rc=$?
  python -m pytest -p no:cacheprovider --timeout=900 --junitxml=out/pytest-unit-junit.xml \
    -n auto tests/unit || rc=$((rc ? rc : $?))
else
  python -m pytest -p no:cacheprovider --timeout=900 --junitxml=out/pytest-junit.xml "$@" \
    tests || rc=$?
fi
if [ "$vm" != 1 ]; then
  echo "== VM layer not run (pytest arguments given or SWELL_VM=0; scripts/vmtest.sh runs it)"
elif [ "$vm_ready" != 1 ]; then
  echo "== VM layer SKIPPED: scripts/bootstrap-vm.sh could not install its pieces"
else
  scripts/vmtest.sh || rc=$((rc ? rc : 1))
fi
# the failures again, in short, last: a CI log may keep only its head and tail
python scripts/junit_failures.py out/pytest-junit.xml out/pytest-unit-junit.xml \
  out/vmtest/junit.xml out/pytest-reruns.txt || true
exit "$rc"
