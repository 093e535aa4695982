"""The files of a testbed run: command lines rewritten to a machine's copies, inputs packed."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from swell.topologies.testbed_files import MachineFiles, machine_roots

ROOT = "/srv/work/swl1234/m1/files"


def files(tmp_path: Path) -> tuple[MachineFiles, Path, Path]:
    run, tmp = tmp_path / "study" / "runs" / "a" / "rep1", tmp_path / "ctl-tmp"
    run.mkdir(parents=True)
    tmp.mkdir()
    roots = machine_roots(run, tmp_path / "study" / "models", tmp, tmp_path / "native", ROOT,
                          "/opt/swell/target/release")
    return MachineFiles("m1", ROOT, roots), run, tmp


def members(data: bytes | None) -> dict[str, bytes | None]:
    assert data is not None
    out: dict[str, bytes | None] = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        for m in tf:
            fh = tf.extractfile(m) if m.isfile() else None
            out[m.name] = fh.read() if fh is not None else None
    return out


def test_command_line_names_the_machines_copies(tmp_path):
    mf, run, _ = files(tmp_path)
    sched = run / "background" / "schedule-0.jsonl"
    sched.parent.mkdir()
    sched.write_text('{"session": 1}\n')
    argv = [str(tmp_path / "native" / "swell-gen"), "run", "--schedule", str(sched),
            "--records", str(run / "background" / "records-0.jsonl"), f"--log={run}/x.log"]
    out, data = mf.pack(argv)
    assert out == ["/opt/swell/target/release/swell-gen", "run", "--schedule",
                   f"{ROOT}/run/background/schedule-0.jsonl", "--records",
                   f"{ROOT}/run/background/records-0.jsonl", f"--log={ROOT}/run/x.log"]
    got = members(data)
    assert got["run/background/schedule-0.jsonl"] == b'{"session": 1}\n'
    assert "run/background" in got and "run" in got  # the outputs' folders
    assert not any("swell-gen" in name for name in got)  # native: never pushed
    # unchanged, folders made: nothing sent again; the command is rewritten the same way
    assert mf.pack(argv) == (out, None)
    sched.write_text('{"session": 2}\n')
    assert members(mf.pack(argv)[1]) == {"run/background/schedule-0.jsonl": b'{"session": 2}\n'}


def test_a_config_is_rewritten_and_what_it_names_goes_with_it(tmp_path):
    mf, run, tmp = files(tmp_path)
    work = run / "foreground" / "apache"
    work.mkdir(parents=True)
    docroot = tmp / "swell-www-abc"
    docroot.mkdir()
    (docroot / "obj-1000").write_bytes(bytes(range(256)) * 4)
    conf = work / "apache.conf"
    conf.write_text(f"ServerRoot /etc/apache2\nPidFile {work}/apache.pid\n"
                    f"Mutex file:{work} default\nDocumentRoot {docroot}\n"
                    f"<Directory {docroot}>\n</Directory>\n")
    out, data = mf.pack(["/usr/sbin/apache2", "-f", str(conf), "-DFOREGROUND"])
    assert out == ["/usr/sbin/apache2", "-f", f"{ROOT}/run/foreground/apache/apache.conf",
                   "-DFOREGROUND"]
    got = members(data)
    text = got["run/foreground/apache/apache.conf"].decode()
    assert str(tmp_path) not in text
    assert f"DocumentRoot {ROOT}/tmp/swell-www-abc\n" in text
    assert f"Mutex file:{ROOT}/run/foreground/apache default" in text
    assert "ServerRoot /etc/apache2" in text
    assert got["tmp/swell-www-abc/obj-1000"] == bytes(range(256)) * 4


def test_unmapped_and_lookalike_paths_stay(tmp_path):
    mf, run, _ = files(tmp_path)
    other = f"{run}-other/file"  # shares the run directory's name as a prefix only
    out, data = mf.pack(["ping", "-c", "1", "/etc/hosts", other])
    assert out == ["ping", "-c", "1", "/etc/hosts", other]
    assert data is None
