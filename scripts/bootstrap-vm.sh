#!/usr/bin/env bash
# Idempotent set-up of the VM test layer's pieces (a TEST dependency only:
# swell itself never needs them). Run as root by ./test.sh after
# scripts/bootstrap.sh; scripts/vmtest.sh uses what it installs.
#
# * Debian's stock kernel (linux-image-amd64: 6.1 on bookworm, sch_netem as a
#   module) - the guest's kernel; it boots this machine's own root filesystem,
#   so its modules under /lib/modules are found by the guest.
# * qemu-system-x86 (the emulator; KVM when it works, TCG otherwise).
# * busybox-static: virtme-ng builds a small initramfs with it (the Debian
#   kernel has virtio and 9p as modules).
# * virtme-ng from PyPI into .venv (pinned), which drives QEMU and shares the
#   host's root filesystem read-only with the checkout writable.
# * virtiofsd (the Rust daemon, crates.io, pinned; built once into $VIRTIOFSD_ROOT,
#   with libseccomp-dev and libcap-ng-dev): with it on PATH virtme-ng shares both
#   over virtio-fs instead of 9p. Measured 2026-11-29 in the TCG guest: boot 28 s
#   (46), `python -c pass` 2.5 s (6.2), `import numpy` 4.4 s (11.7), importing
#   swell's runner 29 s (55); Debian's qemu ships only the old C daemon, which
#   virtme-ng refuses. If the build fails the layer still runs, over 9p (slower).
# Installing a kernel package does not change the kernel this host boots
# into here (nothing reboots); it only puts a vmlinuz under /boot.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
log() { printf '[bootstrap-vm] %s\n' "$*" >&2; }
VIRTME_NG=virtme-ng==1.42
VIRTIOFSD_VERSION=1.14.0
VIRTIOFSD_ROOT=/usr/local/lib/swell-vm  # scripts/vmtest.sh puts its bin/ on PATH
APT_PACKAGES=(qemu-system-x86 linux-image-amd64 busybox-static libseccomp-dev libcap-ng-dev)

if [ "$(id -u)" != 0 ]; then
  echo "bootstrap-vm: must run as root (it installs Debian packages)" >&2
  exit 2
fi
[ -x .venv/bin/python ] || { echo "bootstrap-vm: run scripts/bootstrap.sh first (.venv)" >&2; exit 2; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

stamp="$here/.venv/.stamps/vm-${VIRTME_NG//[^A-Za-z0-9.]/_}"
if [ ! -f "$stamp" ] || [ ! -x .venv/bin/vng ]; then
  log "pip install $VIRTME_NG"
  .venv/bin/python -m pip install -q "$VIRTME_NG"
  mkdir -p "$(dirname "$stamp")"
  rm -f "$here"/.venv/.stamps/vm-*
  touch "$stamp"
fi
vfsd="$VIRTIOFSD_ROOT/bin/virtiofsd"
if ! "$vfsd" --version 2>/dev/null | grep -q " $VIRTIOFSD_VERSION\$"; then
  cargo="$(command -v cargo || echo "$HOME/.cargo/bin/cargo")"
  log "cargo install virtiofsd $VIRTIOFSD_VERSION (about 2 min)"
  if ! "$cargo" install --quiet --locked --force virtiofsd --version "$VIRTIOFSD_VERSION" \
      --root "$VIRTIOFSD_ROOT" 2>&1 | tail -n 20 >&2; then
    log "virtiofsd did not build: the VM layer will share files over 9p (slower)"
  fi
fi
log "ready: $("$vfsd" --version 2>/dev/null || echo 'no virtiofsd (9p)'), \
$(ls /boot/vmlinuz-*-amd64 2>/dev/null | sort -V | tail -n 1), $(.venv/bin/vng --version 2>&1 | head -n 1)"
