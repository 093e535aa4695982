"""Atomic file and directory writing: nothing half-written, nothing destroyed.

Every output swell produces goes to a temporary sibling first and is renamed
into place once complete, so an interrupted run leaves either the old file or
the new one, never a truncated one. Three further rules:

* **Temporaries carry the writer's pid** (``.NAME.swell-PID-XXXX.tmp``); the
  next write beside them removes those whose process is gone, so a SIGKILL
  leaves nothing that survives the next run.
* **Modes follow the umask**, like any file a program creates (0644 files,
  0755 directories under the usual 022): ``mkstemp``/``mkdtemp`` make 0600/0700
  files, which are fixed before the rename, so a root run's results are
  readable by others.
* **Outputs never destroy**: :func:`check_output` refuses an existing output
  that is not a previous output of the same command (``--force`` replaces it),
  the current directory or one of its parents, and special files; OS errors
  on the way (``-o /proc/x``) become one-line :class:`SwellError`. Commands
  that write named files into a directory (``energy -o DIR``) replace their
  own files only when the directory holds a previous output of theirs
  (:func:`check_output_files`); ``swell gen --out DIR`` marks the directories
  it writes (``.swell-gen``) and takes only those, new or empty ones
  (:func:`gen_output_dir`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from swell.errors import SwellError

_TMP_RE = re.compile(r"^(?:old\.)?swell-(\d+)-")


def umask() -> int:
    """The process umask, read without changing it (Linux), else by set-and-restore."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    old = os.umask(0o022)
    os.umask(old)
    return old


def file_mode() -> int:
    return 0o666 & ~umask()


def dir_mode() -> int:
    return 0o777 & ~umask()


def fix_modes(root: Path) -> None:
    """Give ``root`` (and, for a directory, everything under it) umask modes."""
    fm, dm = file_mode(), dir_mode()
    if root.is_dir() and not root.is_symlink():
        os.chmod(root, dm)
        for dirpath, dirnames, filenames in os.walk(root):
            for d in dirnames:
                os.chmod(os.path.join(dirpath, d), dm)
            for f in filenames:
                p = os.path.join(dirpath, f)
                if not os.path.islink(p):
                    os.chmod(p, fm | (stat.S_IMODE(os.lstat(p).st_mode) & 0o111 & dm))
    elif root.exists():
        os.chmod(root, fm)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(parent: Path, name: str) -> list[Path]:
    """Remove temporaries of ``name`` in ``parent`` left by processes that are gone."""
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for p in parent.iterdir():
            if not p.name.startswith(f".{name}."):
                continue
            m = _TMP_RE.match(p.name[len(name) + 2:])
            if m is None or _pid_alive(int(m.group(1))):
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    p.unlink()
            removed.append(p)
    return removed


def _prefix(dest: Path, tag: str = "") -> str:
    return f".{dest.name}.{tag}swell-{os.getpid()}-"


def _os_error(dest: Path, exc: OSError) -> SwellError:
    return SwellError(dest, f"cannot write: {exc.strerror or exc}")


def _prepare_parent(dest: Path) -> None:
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _os_error(dest, exc) from None
    clean_stale(dest.parent, dest.name)


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``dest``; rename it onto ``dest`` on success."""
    dest = Path(dest)
    _prepare_parent(dest)
    try:
        fd, tmp = tempfile.mkstemp(prefix=_prefix(dest), suffix=suffix or ".tmp", dir=dest.parent)
    except OSError as exc:
        raise _os_error(dest, exc) from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, file_mode())
        os.replace(tmp_path, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def write_text(dest: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``dest`` atomically."""
    with atomic_path(dest) as tmp:
        tmp.write_text(text)


def write_json(dest: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented JSON to ``dest`` atomically."""
    write_text(dest, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


@contextlib.contextmanager
def atomic_dir(dest: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary directory beside ``dest``; swap it into place on success.

    An existing ``dest`` is replaced only after the new one is complete (callers
    decide first whether it may be replaced: :func:`check_output`). Modes of
    everything inside follow the umask.
    """
    dest = Path(dest)
    _prepare_parent(dest)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=_prefix(dest), dir=dest.parent))
    except OSError as exc:
        raise _os_error(dest, exc) from None
    try:
        yield tmp
        fix_modes(tmp)
        if dest.exists() or dest.is_symlink():
            old = Path(tempfile.mkdtemp(prefix=_prefix(dest, "old."), dir=dest.parent))
            os.replace(dest, old / "x")
            os.replace(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dest)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _os_error(dest, exc) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _contains_cwd(dest: Path) -> bool:
    try:
        here = Path.cwd().resolve()
    except OSError:
        return False
    d = dest.resolve()
    return d == here or d in here.parents


def check_output(dest: str | os.PathLike[str], *, is_previous: Callable[[Path], bool],
                 what: str, force: bool = False, directory: bool = True) -> Path:
    """Refuse an output path whose replacement would destroy something.

    ``directory``: the output is a directory replaced whole (else a file).
    Allowed: a missing path, an empty directory, a previous output of the same
    command (``is_previous``), anything else only with ``force``. Never: the
    current directory or one that contains it, a special file (FIFO, device,
    socket), or a path whose parent is not a writable directory.
    """
    dest = Path(dest)
    if _contains_cwd(dest):
        raise SwellError(dest, f"is the current directory or contains it; give a new "
                               f"path for the {what}")
    parent = dest.resolve().parent
    if parent.exists() and not parent.is_dir():
        raise SwellError(dest, f"{parent} is not a directory")
    anc = parent
    while not anc.exists():
        anc = anc.parent
    if not os.access(anc, os.W_OK | os.X_OK) or str(anc).startswith(("/proc", "/sys")):
        raise SwellError(dest, f"cannot write here ({anc} is not writable)")
    if not dest.exists() and not dest.is_symlink():
        return dest
    mode = os.lstat(dest).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
        raise SwellError(dest, "is a special file (FIFO, device or socket), not an output path")
    if stat.S_ISDIR(mode) and not directory:  # even empty: a file cannot replace it
        raise SwellError(dest, f"is a directory; give a file path for the {what}")
    if stat.S_ISDIR(mode) and not any(dest.iterdir()):
        return dest
    if is_previous(dest) or force:
        return dest
    kind = "a directory" if stat.S_ISDIR(mode) else "a file"
    raise SwellError(dest, f"exists and is {kind} that is not a {what}; refusing to replace "
                           "it (--force replaces it)")


def check_output_dir(dest: str | os.PathLike[str], what: str) -> Path:
    """For commands that write named files into a directory (``-o DIR``): the path
    must be a directory or not exist (nothing in it is removed)."""
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise SwellError(dest, f"exists and is not a directory; give a directory for the {what}")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _os_error(dest, exc) from None
    return dest


def check_output_files(dest: str | os.PathLike[str], patterns: tuple[str, ...], *,
                       is_previous: Callable[[Path], bool], what: str,
                       force: bool = False) -> Path:
    """:func:`check_output_dir`, and the files this command writes there (``patterns``,
    globs) replaced only when ``dest`` holds a previous output of the command
    (``is_previous``) or with ``force``: a file of that name that is the user's is
    refused, before any work. Other files in ``dest`` are never touched."""
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise SwellError(dest, f"exists and is not a directory; give a directory for the {what}")
    if dest.is_dir() and not force and not is_previous(dest):
        for pattern in patterns:
            for found in sorted(dest.glob(pattern)):
                raise SwellError(found, f"exists and is not from a previous {what}; refusing "
                                        "to replace it (--force replaces it)")
    return check_output_dir(dest, what)


GEN_MARKER = ".swell-gen"  # in every directory ``swell gen --out`` wrote


def check_gen_output(arg: str | os.PathLike[str], force: bool = False) -> Path:
    """What :func:`gen_output_dir` refuses, checked without writing anything (a command
    checks its output before reading its inputs)."""
    d = check_output(arg, is_previous=lambda p: (p / GEN_MARKER).is_file(),
                     what="swell gen output directory", force=force)
    if d.exists() and not d.is_dir():
        raise SwellError(d, "exists and is not a directory; give a directory for swell gen's "
                            "output")
    return d


def gen_output_dir(arg: str | os.PathLike[str] | None, label: str, force: bool = False) -> Path:
    """The output directory of ``swell gen LABEL``: a new temporary one without ``--out``;
    else a missing or empty directory, one a previous ``swell gen`` wrote (it holds
    :data:`GEN_MARKER`), or anything with ``force``; created and marked."""
    if not arg:
        d = Path(tempfile.mkdtemp(prefix=f"swell-gen-{label}-"))
    else:
        d = check_gen_output(arg, force)
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _os_error(d, exc) from None
    try:
        (d / GEN_MARKER).write_text(f"{label}\n")
    except OSError as exc:
        raise _os_error(d, exc) from None
    return d


@contextlib.contextmanager
def dir_lock(directory: Path, what: str) -> Iterator[TextIO]:
    """An exclusive lock on ``directory`` (``DIR/.lock``, flock) for the life of the
    block; a second holder gets a one-line error naming the first one's pid."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ".lock"
    fh = open(path, "a+")  # noqa: SIM115 (held for the block)
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "?"
            raise SwellError(directory, f"another swell process (pid {holder}) is using "
                                        f"this {what}; wait for it or choose another "
                                        "directory") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        with contextlib.suppress(OSError):
            os.chmod(path, file_mode())
        yield fh
    finally:
        fh.close()


def is_special(path: str | os.PathLike[str]) -> bool:
    """A FIFO, socket or device: reading it may block forever or never end."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def input_file(path: str | os.PathLike[str], what: str) -> Path:
    """An input path that is an existing, readable regular file (else a one-line error
    that says what it is instead: missing, a directory, a FIFO or device, unreadable)."""
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise SwellError(p, "no such file") from None
    except OSError as exc:
        raise SwellError(p, f"cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise SwellError(p, f"is a directory, not a {what} file")
    if not stat.S_ISREG(mode):
        raise SwellError(p, f"is a FIFO, socket or device, not a {what} file")
    if not os.access(p, os.R_OK):
        raise SwellError(p, "cannot read: permission denied")
    return p
