#!/usr/bin/env bash
# The VM test layer: runs the netem-marked tests inside a QEMU guest that boots
# Debian's stock kernel (which has sch_netem) on this machine's own root
# filesystem (virtme-ng), because the host kernel lacks sch_netem.
#
#   scripts/vmtest.sh [pytest args...]     # -m netem tests/integration + args (e.g. -k bdp)
#   scripts/vmtest.sh --exec "CMD"         # run CMD in the guest (cwd = checkout), e.g. a bench
#
# Design:
# * The guest's pieces (linux-image-amd64, qemu-system-x86, busybox-static,
#   virtme-ng) are installed by scripts/bootstrap-vm.sh, a test dependency only.
# * Whether the host can boot a guest is decided by trying, with time limits:
#   a KVM boot first (on this machine QEMU aborts at once, "failed to set MSR"),
#   then TCG. When neither boots, the layer is SKIPPED with the reason and the
#   script exits 0 (exit 1 only when the guest ran and its tests failed).
# * The whole layer runs under `flock /tmp/swell-cpu.lock` (TCG is CPU-heavy),
#   unless an ancestor process already holds that lock (a developer's
#   `flock /tmp/swell-cpu.lock ./test.sh`): taking it again would deadlock.
# * The guest shares the checkout read-write (--rwdir); its /tmp, /run and /var
#   are overlays in guest memory, so namespaces, state and pytest's tmp dirs
#   stay inside the guest. The guest runs this same script with --guest.
# * Limits: KVM probe 60 s, TCG probe 150 s, the tests 480 s (VM layer < 10 min);
#   SWELL_VM_RUN_S raises the last one for a long --exec (bench/bench_engines.py).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
LOCK=/tmp/swell-cpu.lock
KVM_PROBE_S=${SWELL_VM_KVM_PROBE_S:-60}
TCG_PROBE_S=${SWELL_VM_TCG_PROBE_S:-150}
RUN_S=${SWELL_VM_RUN_S:-480}

say() { printf '[vmtest] %s\n' "$*" >&2; }
skip() {
  echo "== VM layer SKIPPED: $*"
  exit 0
}

# ------------------------------------------------------------------ inside the guest
if [ "${1:-}" = "--guest" ]; then
  shift
  export PATH="$repo/.venv/bin:$HOME/.cargo/bin:$PATH"
  for m in sch_netem sch_htb sch_tbf tun veth ifb; do modprobe "$m" 2>/dev/null || true; done
  sysctl -qw net.ipv4.ping_group_range="0 2147483647" 2>/dev/null || true
  echo "guest: kernel $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  rc=0
  if [ "${1:-}" = "--exec" ]; then
    bash -c "$2" || rc=$?
  else
    python -m pytest -p no:cacheprovider --timeout=300 "$@" || rc=$?
  fi
  echo "VMTEST-RC=$rc"
  exit "$rc"
fi

# ------------------------------------------------------------------ on the host
if [ "${1:-}" = "--exec" ]; then
  [ $# -eq 2 ] || { echo "usage: scripts/vmtest.sh --exec CMD" >&2; exit 2; }
  guest_args=(--exec "$2")
else
  guest_args=(-m netem tests/integration "$@")
fi

kernel="$(ls /boot/vmlinuz-*-amd64 2>/dev/null | sort -V | tail -n 1 || true)"
[ -n "$kernel" ] || skip "no Debian kernel in /boot (scripts/bootstrap-vm.sh installs linux-image-amd64)"
vng="$repo/.venv/bin/vng"
[ -x "$vng" ] || skip "virtme-ng is not installed in .venv (scripts/bootstrap-vm.sh)"
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 missing (Debian qemu-system-x86)"
command -v busybox >/dev/null || skip "busybox missing (Debian busybox-static; virtme-ng's initramfs needs it)"
export PATH="$repo/.venv/bin:$PATH"

# Does an ancestor of this process hold the CPU lock? (/proc/locks names the holder's pid.)
lock_held_by_ancestor() {
  [ -e "$LOCK" ] || return 1
  local ino holders pid
  ino="$(stat -c %i "$LOCK")"
  holders="$(awk -v ino="$ino" '{ split($6, a, ":"); if (a[3] == ino) print $5 }' /proc/locks)"
  [ -n "$holders" ] || return 1
  pid=$$
  while [ "$pid" -gt 1 ]; do
    if grep -qx "$pid" <<<"$holders"; then return 0; fi
    pid="$(awk '/^PPid:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 1)"
  done
  return 1
}

if [ "${SWELL_VM_LOCKED:-}" != 1 ]; then
  if lock_held_by_ancestor; then
    say "the CPU lock is held by a parent process; not taking it again"
  else
    say "waiting for $LOCK"
    export SWELL_VM_LOCKED=1
    exec flock "$LOCK" "$0" "$@"
  fi
fi

vm() {  # vm SECONDS ACCEL-ARGS... -- GUEST-ARGS...
  local limit="$1"; shift
  local accel=()
  while [ "$1" != -- ]; do accel+=("$1"); shift; done
  shift
  timeout --kill-after=10 "$limit" "$vng" "${accel[@]}" --run "$kernel" --user root \
    --memory 2G --cpus 2 --rwdir "$repo" \
    --exec "$repo/scripts/vmtest.sh --guest $(printf '%q ' "$@")" </dev/null
}

t0=$SECONDS
kvm_log="$(mktemp)"; tcg_log="$(mktemp)"; out="$(mktemp)"
trap 'rm -f "$kvm_log" "$tcg_log" "$out"' EXIT
if [ -e /dev/kvm ] && vm "$KVM_PROBE_S" -- --exec true >"$kvm_log" 2>&1 \
    && grep -q "VMTEST-RC=0" "$kvm_log"; then
  accel=()
  mode="KVM"
elif vm "$TCG_PROBE_S" --disable-kvm -- --exec true >"$tcg_log" 2>&1 \
    && grep -q "VMTEST-RC=0" "$tcg_log"; then
  accel=(--disable-kvm)
  why="$(grep -m1 -iE 'error|fail|no such' "$kvm_log" || true)"
  mode="TCG (KVM did not boot: ${why:-/dev/kvm missing or no answer in ${KVM_PROBE_S} s})"
else
  skip "no guest booted within the limits (KVM ${KVM_PROBE_S} s, TCG ${TCG_PROBE_S} s): $(tail -n 3 "$tcg_log" | tr '\n' ' ')"
fi
say "guest boots: $(basename "$kernel"), $mode (probes took $((SECONDS - t0)) s)"

echo "== VM layer ($(basename "$kernel"), ${mode%% *}): ${guest_args[*]}"
set +e
vm "$RUN_S" "${accel[@]}" -- "${guest_args[@]}" 2>&1 | tee "$out"
vm_rc=${PIPESTATUS[0]}
set -e
rc="$(grep -ao 'VMTEST-RC=[0-9]*' "$out" | tail -n 1 | cut -d= -f2)"
if [ -z "$rc" ]; then
  echo "== VM layer FAILED: the guest did not finish (vng exit $vm_rc; limit ${RUN_S} s)"
  exit 1
fi
say "VM layer took $((SECONDS - t0)) s"
exit "$rc"
