#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian bookworm machine, run as root.
#
# Installs the Debian packages swell drives (Mininet, tc, tcpdump, tshark,
# D-ITG, httperf, Apache, tcpreplay, ffmpeg, GStreamer, ...; python3-apt for Ansible's apt
# module on testbed machines), a Rust toolchain if cargo is
# missing, a virtualenv in .venv made from Debian's /usr/bin/python3 with
# --system-site-packages (so Mininet's Debian module imports), the pinned
# Python dependencies, swell itself (editable) and the native core.
# A stamp file per step makes a second run fast.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
stamp_dir="$here/.venv/.stamps"
log() { printf '[bootstrap] %s\n' "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
  echo "bootstrap: must run as root (it installs Debian packages and uses namespaces)" >&2
  exit 2
fi

APT_PACKAGES=(
  python3 python3-venv python3-dev python3-pip
  iproute2 ethtool iptables tcpdump tshark mininet
  d-itg httperf apache2 tcpreplay nfdump softflowd iperf3
  build-essential pkg-config curl ca-certificates git procps psmisc kmod iputils-ping libxxhash0
  ffmpeg gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav socat
  openssh-server python3-apt
)
# (The VM test layer's pieces - a stock kernel, QEMU, virtme-ng - are a test
# dependency only: scripts/bootstrap-vm.sh, which ./test.sh runs.)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# (Apache is started by swell with its own config inside the run's namespaces; a
# system Apache the package may have started lives in the host namespace and is
# left alone.)

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    # Debian 12's cargo package (1.63) cannot read swell's lock file; its cargo-web and
    # rustc-web (a current Rust, packaged for building the browsers) can. Debian 13's
    # cargo (1.85) can.
    rust_pkgs=(cargo rustc)
    if apt-cache show cargo-web >/dev/null 2>&1; then rust_pkgs=(cargo-web rustc-web); fi
    log "installing Rust (Debian ${rust_pkgs[*]})"
    apt-get install -y -qq --no-install-recommends "${rust_pkgs[@]}" >/dev/null
  fi
fi

mkdir -p "$stamp_dir" 2>/dev/null || true
if [ ! -x .venv/bin/python ]; then
  log "creating .venv from /usr/bin/python3 (with system site packages, for Mininet)"
  /usr/bin/python3 -m venv --system-site-packages .venv
  mkdir -p "$stamp_dir"
fi
req_hash="$(cat requirements.lock pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp_dir/pip-$req_hash" ]; then
  log "pip install -r requirements.lock and swell (editable)"
  .venv/bin/python -m pip install -q --upgrade pip==24.3.1
  .venv/bin/python -m pip install -q -r requirements.lock
  .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .
  rm -f "$stamp_dir"/pip-*
  touch "$stamp_dir/pip-$req_hash"
fi

# Cargo.lock is a version-4 lock file: cargo 1.78 or newer reads it (Debian 12's cargo
# package is 1.63, its cargo-web 1.85 and later; Debian 13's cargo 1.85)
CARGO_MIN=1.78
cargo_version="$(cargo --version 2>/dev/null | awk '{print $2}')"
if [ -f Cargo.toml ] && [ "$(printf '%s\n%s\n' "$CARGO_MIN" "${cargo_version:-0}" | sort -V | head -n 1)" != "$CARGO_MIN" ]; then
  echo "bootstrap: cargo ${cargo_version:-(none)} is older than swell's Cargo.lock needs ($CARGO_MIN):" \
       "install Rust with rustup (https://rustup.rs), then run this again" >&2
  exit 3
fi
if [ -f Cargo.toml ]; then
  log "building the native core (cargo build --release)"
  cargo build --release --quiet --locked 2>&1 | tail -n 20 >&2 || cargo build --release --quiet
fi
log "ready: $(.venv/bin/swell --version 2>/dev/null || echo 'swell not importable')"
