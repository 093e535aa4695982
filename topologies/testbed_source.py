"""The native programs' source, packed to be built on a testbed machine.

``prepare`` installs the native programs a machine lacks (``swell-gen`` on the
background's machines, ``swell-link`` on a router without netem) either by copying
the control machine's build, which only serves machines of its architecture and C
library, or by building them on the machine (``native: build`` in the hosts file, or
``auto`` when the copy cannot serve). A testbed's machines often cannot reach
crates.io (an isolated experiment network, a control network behind a firewall), so
the build must not download anything: :func:`write_source_bundle` packs the cargo
workspace of the control machine's checkout (``Cargo.toml``, ``Cargo.lock`` and the
four member crates, without ``target/``) with every dependency vendored by ``cargo
vendor`` (on the control machine, which has the crates or reaches the registry) and
a ``.cargo/config.toml`` that points cargo at them, into one ``.tar.gz``. On the
machine, ``cargo build --release --offline --locked -p <program>`` in the unpacked
folder builds exactly the locked versions (``ansible/roles/swell_prepare/tasks/build.yml``).

``cargo vendor`` cannot leave out other platforms' crates, so the bundle carries the
Windows ones too (about 13 MB packed); it is written once per rendered testbed and
copied only to the machines that build. The archive is written to a temporary file
and renamed, so two machines asking for it at once both find a whole one.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import tomllib
from pathlib import Path

from swell.errors import SwellError

CONFIG = """# written by swell (topologies/testbed_source.py): build from the vendored crates
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "vendor"
"""


def workspace_members(root: Path) -> list[str]:
    """The cargo workspace's member folders (relative to ``root``)."""
    try:
        data = tomllib.loads((root / "Cargo.toml").read_text())
        members = data["workspace"]["members"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise SwellError(root / "Cargo.toml", f"not swell's cargo workspace: {exc}") from None
    return [str(m) for m in members]


def find_cargo() -> str | None:
    """cargo on PATH, else rustup's in the user's home; None without either."""
    home = Path.home() / ".cargo/bin/cargo"
    return shutil.which("cargo") or (str(home) if home.is_file() else None)


def _cargo() -> str:
    found = find_cargo()
    if found is None:
        raise SwellError("cargo", "not found on the control machine (it vendors the native "
                                  "programs' crates for the machines that build them): "
                                  "install Rust, or build on each machine by hand")
    return found


def write_source_bundle(root: Path, out: Path) -> Path:
    """Pack the workspace at ``root`` with its vendored crates into ``out`` (.tar.gz)."""
    root = root.resolve()
    members = workspace_members(root)
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".swell-src-", dir=out.parent) as tmp:
        vendor = Path(tmp) / "vendor"
        res = subprocess.run([_cargo(), "vendor", "--locked", "--versioned-dirs",
                              "--manifest-path", str(root / "Cargo.toml"), str(vendor)],
                             capture_output=True, text=True, timeout=600)
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or ["no output"])[-1]
            raise SwellError("cargo vendor", f"cannot vendor the native crates: {last}")
        part = Path(tmp) / "bundle.tar.gz"
        with tarfile.open(part, "w:gz") as tar:
            for name in ("Cargo.toml", "Cargo.lock"):
                tar.add(root / name, arcname=name)
            for m in members:  # without a build folder inside a member
                tar.add(root / m, arcname=m, filter=lambda ti, m=m: None if
                        Path(ti.name).relative_to(m).parts[:1] == ("target",) else ti)
            tar.add(vendor, arcname="vendor")
            info = tarfile.TarInfo(".cargo/config.toml")
            data = CONFIG.encode()
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        part.chmod(0o644)
        os.replace(part, out)
    return out
