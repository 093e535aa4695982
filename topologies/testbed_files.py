"""The files of a testbed run: staged for each machine's own work directory, results read back.

A traffic kind writes its inputs (a Swing schedule, Apache's configuration and
objects) on the control machine and hands a machine a command line naming
them, at control-machine paths. The machines share nothing with the control
machine but SSH, so every machine gets its own copy under its work directory,
which carries the run prefix (``<workdir>/<prefix>/<machine>/files``), and
every command line is rewritten to name the copies. :class:`MachineFiles`
does this for one machine; :mod:`swell.experiments.testbed_jobs` calls
:meth:`MachineFiles.prepare` on every command it records for the machine.

Mapped roots, longest first (a path under none of them is left as it is):

* the run directory -> ``files/run`` (pushed; results come back from here),
* the study's model cache -> ``files/models`` (pushed),
* the control machine's temporary folder -> ``files/tmp`` (pushed; Apache's
  objects are made there),
* swell's native folder -> the machine's own (from its ``swell testbed host
  facts``; never pushed: every machine runs its own build).

Staging, on each command: every mapped path in the command line that exists
here is packed (a folder with its contents); a text file that names mapped
paths is packed with those names rewritten, and what they name is packed too
(Apache's configuration names its object folder). A mapped path that does not
exist here is an output: its folder is made on the machine. An unchanged file
(same contents; same size and time for one over 1 MiB) is packed once.
:meth:`MachineFiles.bundle` is the one tar of everything staged, which the
``run`` playbook unpacks into the machine's ``files`` folder before anything
starts. Reading back (:meth:`MachineFiles.pull`, from the tar ``collect``
fetched, before teardown removed the work directory) brings every file under
``files/run`` that was not pushed into the run directory; two machines
returning the same file with different contents is an error, not a silent
overwrite.

Every rewritten command is kept (:attr:`MachineFiles.commands`) for the run's
record (``RUN/testbed/commands.jsonl``): what each machine was asked to run.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from swell.errors import SwellError

MAX_TEXT_BYTES = 1 << 20  # larger files are sent as they are (not scanned for paths)
_PATH_TAIL = r"[^\s\"'<>,;]*"


@dataclass(frozen=True)
class Root:
    """One mapped root: a control-machine folder and where it is on the machine."""

    local: str  # absolute, no trailing slash
    remote: str
    push: bool = True


@dataclass
class MachineFiles:
    """One machine's copies of a run's files (see the module docstring)."""

    machine: str
    root: str  # the machine's files folder: <workdir>/<prefix>/<machine>/files
    roots: tuple[Root, ...]
    pushed: dict[str, str] = field(default_factory=dict)  # remote path -> what was sent
    commands: list[dict[str, Any]] = field(default_factory=list)
    folders: set[str] = field(default_factory=set)  # made there already
    bytes_pushed: int = 0
    staged: list[bytes] = field(default_factory=list)  # tar streams for the machine
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.roots = tuple(sorted(self.roots, key=lambda r: len(r.local), reverse=True))
        alts = "|".join(re.escape(r.local) for r in self.roots)
        self._pattern = re.compile(f"(?:{alts})(?=/|$|[\\s\"'<>,;]){_PATH_TAIL}") \
            if alts else None

    # --- paths -------------------------------------------------------------------------

    def _root_of(self, path: str) -> Root | None:
        for r in self.roots:
            if path == r.local or path.startswith(r.local + "/"):
                return r
        return None

    def remote_path(self, path: str) -> str:
        """Where a control-machine path is on this machine (unmapped: unchanged)."""
        r = self._root_of(path)
        return path if r is None else r.remote + path[len(r.local):]

    def rewrite(self, text: str) -> str:
        """``text`` with every mapped path in it replaced by the machine's."""
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: self.remote_path(m.group(0)), text)

    def _mentioned(self, text: str) -> list[str]:
        return [] if self._pattern is None else \
            [m.group(0).rstrip("/") or "/" for m in self._pattern.finditer(text)]

    # --- pushing -----------------------------------------------------------------------

    def prepare(self, argv: Sequence[str]) -> list[str]:
        """The command line to run on the machine; its inputs staged for it."""
        with self._lock:
            out, data = self.pack(argv)
            if data is not None:
                self.staged.append(data)
                self.bytes_pushed += len(data)
            self.commands.append({"machine": self.machine, "t": round(time.time(), 3),
                                  "argv": out})
        return out

    def pack(self, argv: Sequence[str]) -> tuple[list[str], bytes | None]:
        """The rewritten command line and the tar stream of what it needs there (None:
        nothing new); what it packs counts as pushed."""
        argv = [str(a) for a in argv]
        tar = _Tar(self.folders)
        seen: set[str] = set()
        for arg in argv:
            for path in self._mentioned(arg):
                self._add(path, tar, seen)
        self.folders |= tar.folders
        return [self.rewrite(a) for a in argv], (tar.finish() if tar.members else None)

    def _add(self, path: str, tar: _Tar, seen: set[str]) -> None:
        """Queue ``path`` (and what a text file names) for the machine, once."""
        if path in seen:
            return
        seen.add(path)
        root = self._root_of(path)
        if root is None or not root.push:
            return
        remote = self.remote_path(path)
        local = Path(path)
        if local.is_dir():
            tar.directory(self._rel(remote), local.stat().st_mode)
            for child in sorted(local.rglob("*")):
                self._add(str(child), tar, seen)
        elif local.is_file():
            self._add_file(local, remote, tar, seen)
        else:  # an output: its folder must exist there
            tar.directory(self._rel(str(PurePosixPath(remote).parent)), 0o40755)

    def _add_file(self, local: Path, remote: str, tar: _Tar, seen: set[str]) -> None:
        st = local.stat()
        data: bytes | None = None
        if st.st_size <= MAX_TEXT_BYTES:
            raw = local.read_bytes()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None and (names := self._mentioned(text)):
                for name in names:
                    self._add(name, tar, seen)
                raw = self.rewrite(text).encode("utf-8")
            data = raw
        stamp = hashlib.sha256(data).hexdigest() if data is not None else \
            f"{st.st_size}:{st.st_mtime_ns}"
        if self.pushed.get(remote) == stamp:
            return
        self.pushed[remote] = stamp
        tar.file(self._rel(remote), local, data, st.st_mode)

    def _rel(self, remote: str) -> str:
        if not (remote == self.root or remote.startswith(self.root + "/")):
            raise SwellError(self.machine, f"{remote} is outside the machine's files folder")
        return remote[len(self.root):].lstrip("/") or "."

    def bundle(self) -> bytes:
        """One tar of everything staged, in order (a later copy of a file wins); never
        empty: the machine's ``run`` folder comes first."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as out:
            top = tarfile.TarInfo("run")
            top.type, top.mode, top.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
            out.addfile(top)
            folders = {"run"}
            for data in self.staged:
                with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as part:
                    for member in part:
                        if member.isdir() and member.name in folders:
                            continue
                        folders.add(member.name)
                        out.addfile(member, part.extractfile(member) if member.isfile()
                                    else None)
        return buf.getvalue()

    # --- pulling -----------------------------------------------------------------------

    def pull(self, collected: Path, run_dir: Path, got: dict[Path, str]) -> list[Path]:
        """Bring back the files this machine made under the run directory (not the
        pushed ones) into ``run_dir``, from ``collected``: the tar ``collect`` fetched,
        holding the machine's ``files/run`` (members ``files/run/...``); ``got``:
        file -> machine, across machines."""
        run_root = next((r for r in self.roots if r.local == str(run_dir.resolve())), None)
        if run_root is None or not collected.exists():
            return []
        rel = self._rel(run_root.remote)
        out = []
        with tarfile.open(collected, mode="r:") as tf:
            for member in tf:
                name = PurePosixPath(member.name)
                if name.is_absolute() or ".." in name.parts:
                    raise SwellError(self.machine, f"unexpected file {member.name} collected")
                if not member.isfile() or name.parts[:2] != ("files", rel):
                    continue
                remote = f"{self.root}/{PurePosixPath(*name.parts[1:])}"
                if remote in self.pushed:
                    continue
                local = run_dir.joinpath(*name.parts[2:])
                src = tf.extractfile(member)
                data = src.read() if src is not None else b""
                if local in got and local.read_bytes() != data:
                    raise SwellError(local, f"made by both {got[local]} and {self.machine}")
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_bytes(data)
                got[local] = self.machine
                out.append(local)
        return out


class _Tar:
    """A tar stream being built in memory (folders first, then files)."""

    def __init__(self, known: set[str]) -> None:
        self.buf = io.BytesIO()
        self.tf = tarfile.open(fileobj=self.buf, mode="w:", format=tarfile.PAX_FORMAT)
        self.members: set[str] = set()
        self.folders: set[str] = set()
        self.known = known  # folders made there by an earlier stream

    def _parents(self, rel: str) -> None:
        parts = PurePosixPath(rel).parts
        for i in range(1, len(parts)):
            self.directory("/".join(parts[:i]), 0o40755)

    def directory(self, rel: str, mode: int) -> None:
        if rel in self.members or rel in self.known or rel == ".":
            return
        self._parents(rel)
        info = tarfile.TarInfo(rel)
        info.type = tarfile.DIRTYPE
        info.mode = (mode & 0o777) | 0o755  # traversable (Apache's workers, tcpdump)
        info.mtime = int(time.time())
        self.tf.addfile(info)
        self.members.add(rel)
        self.folders.add(rel)

    def file(self, rel: str, local: Path, data: bytes | None, mode: int) -> None:
        if rel in self.members:
            return
        self._parents(rel)
        info = tarfile.TarInfo(rel)
        info.mode = mode & 0o777
        info.mtime = int(local.stat().st_mtime)
        if data is None:
            info.size = local.stat().st_size
            with local.open("rb") as fh:
                self.tf.addfile(info, fh)
        else:
            info.size = len(data)
            self.tf.addfile(info, io.BytesIO(data))
        self.members.add(rel)

    def finish(self) -> bytes:
        self.tf.close()
        return self.buf.getvalue()


def machine_roots(run_dir: Path, models: Path | None, tmp: Path, native_local: Path,
                  files_root: str, native_remote: str | None) -> tuple[Root, ...]:
    """The mapped roots of one machine (see the module docstring)."""
    roots = [Root(str(run_dir.resolve()), f"{files_root}/run"),
             Root(str(tmp.resolve()), f"{files_root}/tmp")]
    if models is not None:
        roots.append(Root(str(models.resolve()), f"{files_root}/models"))
    if native_remote:
        roots.append(Root(str(native_local.resolve()), native_remote, push=False))
    return tuple(roots)
