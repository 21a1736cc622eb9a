"""Hostile input, issue 26, outside the studio: batch files (alias bombs, unsafe tags, deep
nesting, FIFOs), the Markdown export's links, the bundle verifier (links, zip bombs,
duplicate members, FIFOs), the queue URL's password and MCP tool-name collisions."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import socket
import stat
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

import pytest

from pensieve.project.status import load_status, save_status
from tests.conftest import Home
from tests.fakes.cli_process import child_env
from tests.publish_fixtures import write_final


def _alias_bomb(field: str) -> str:
    """A few hundred bytes whose `field` expands to 10^9 leaves when a YAML loader builds it."""
    levels = ["&l0 [x, x, x, x, x, x, x, x, x, x]"]
    for n in range(1, 9):
        levels.append(f"&l{n} [" + ", ".join([f"*l{n - 1}"] * 10) + "]")
    return f"- brief: How B-trees lay out pages\n  {field}: [{', '.join(levels)}]\n"


def _refused(home: Home, path: Path) -> str:
    result = home.run("batch", str(path))
    assert result.exit_code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}"), result.stderr
    workspace = home.path / "workspaces" / "default"
    assert not (workspace / "projects").exists() or not any((workspace / "projects").iterdir())
    assert home.model.requests == []
    return lines[0]


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bomb.yaml", _alias_bomb("id"), "bomb.yaml:2: YAML alias *l0 in a batch file; write each value out"),
        ("bomb.yaml", _alias_bomb("target_words"), "bomb.yaml:2: YAML alias *l0"),
        ("alias.yaml", "- brief: &b Why B-trees\n- brief: *b\n  id: other\n", "alias.yaml:2: YAML alias *b"),
        (
            "tag.yaml",
            "- brief: x\n  id: !!python/object:os.system [echo hi]\n",
            "tag.yaml:2: bad YAML: could not determine a constructor for the tag",
        ),
        ("list.yaml", "- brief: x\n  id: [a, b]\n", "list.yaml:1: id must be text"),
        ("map.jsonl", '{"brief": "x", "target_words": {"a": 1}}\n', "map.jsonl:1: target_words must be a whole number"),
        (
            "deep.yaml",
            "- brief: x\n  id: " + "[" * 50_000 + "]" * 50_000 + "\n",
            "nested too deeply to be a batch file",
        ),
        ("deep.jsonl", '{"brief": "x", "id": ' + "[" * 100_000 + "]" * 100_000 + "}\n", "nested too deeply"),
    ],
)
def test_hostile_batch_files_are_one_line_refusals(home: Home, name: str, content: str, expected: str) -> None:
    assert len(content) < 1000 or "deep" in name  # the bombs are small files
    path = home.path / name
    path.write_text(content)
    line = _refused(home, path)
    assert expected in line, line
    assert "check the project's files" not in line


def test_a_fifo_as_the_batch_file_is_refused_not_waited_on(home: Home) -> None:
    fifo = home.path / "items.yaml"
    os.mkfifo(fifo)
    result = subprocess.run(
        [sys.executable, "-m", "pensieve", "batch", str(fifo)],
        env=child_env(home.path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().startswith(f"error: {fifo}: not a regular file (a pipe, device or directory)")
    directory = home.path / "dir.yaml"
    directory.mkdir()
    assert "not a regular file" in _refused(home, directory)


# -- the bundle verifier ------------------------------------------------------------------

PROJECT = "vdb"


@pytest.fixture
def bundle(home: Home) -> Path:
    """A bundle directory exported from a finished project; it verifies."""
    home.new("How vector databases index embeddings", "--id", PROJECT)
    project_dir = home.project_dir(PROJECT)
    write_final(project_dir)
    status = load_status(project_dir / "status.json")
    for entry in status.stages.values():
        entry.status = "complete"
    save_status(project_dir / "status.json", status)
    result = home.run("export", PROJECT, "--bundle")
    assert result.exit_code == 0, result.stderr
    path = Path(result.stdout.strip())
    assert home.run("export", "--verify", str(path)).exit_code == 0
    return path


# `python -c` this, PEAK_FILE, then the CLI's arguments: runs the CLI as `python -m pensieve`
# does, and writes the process's own peak RSS (VmHWM, kB) to PEAK_FILE as it exits.
_REPORTS_ITS_PEAK = """
import atexit, runpy, sys
peak_file = sys.argv.pop(1)
def report():
    with open("/proc/self/status") as status:
        kb = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(peak_file, "w") as out:
        out.write(kb)
atexit.register(report)
sys.argv[0] = "pensieve"
runpy.run_module("pensieve", run_name="__main__", alter_sys=True)
"""


def _verify(home: Home, path: Path, *, limit_memory: bool = False) -> tuple[int, str, int]:
    """`pensieve export --verify path` in its own process: (exit code, stderr, peak RSS in
    bytes of that process alone). A 2 GB address-space limit keeps a regression from taking
    the machine down; the timeout catches a hang. The peak is the child's own VmHWM, read by
    the child as it exits: wait4's ru_maxrss would carry over the RSS of the pytest worker it
    was forked from (Linux keeps the high-water mark across exec), 1.4 GB once torch is in."""
    out, err, peak = home.path / "verify.out", home.path / "verify.err", home.path / "verify.peak"
    peak.unlink(missing_ok=True)

    def limit() -> None:
        if limit_memory:
            resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    with out.open("wb") as stdout, err.open("wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", _REPORTS_ITS_PEAK, str(peak), "export", "--verify", str(path)],
            env=child_env(home.path),
            stdout=stdout,
            stderr=stderr,
            preexec_fn=limit,
        )
        deadline = time.monotonic() + 120
        while True:
            pid, status, _usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                child.kill()
                child.wait()
                raise AssertionError(f"--verify {path} still running after 120 s")
            time.sleep(0.05)
        child.returncode = os.waitstatus_to_exitcode(status)
    assert peak.is_file(), f"--verify {path} ended without reporting its peak memory: {err.read_text()}"
    return child.returncode, err.read_text(), int(peak.read_text()) * 1024


def _one_line(code: int, stderr: str) -> str:
    assert code == 1, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: bundle "), stderr
    return lines[0]


def test_a_symlinked_source_is_refused_even_with_its_hash_in_the_manifest(home: Home, bundle: Path) -> None:
    outside = home.path / "outside.txt"
    outside.write_bytes(b"not from the bundle\n")
    manifest = json.loads((bundle / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["path"] == "sources/S1.txt":
            entry.update(sha256=hashlib.sha256(outside.read_bytes()).hexdigest(), bytes=outside.stat().st_size)
    for source in manifest["sources"]:
        if source["id"] == "S1":
            source["text_sha256"] = hashlib.sha256(outside.read_bytes()).hexdigest()
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    (bundle / "sources" / "S1.txt").unlink()
    (bundle / "sources" / "S1.txt").symlink_to(outside)
    line = _one_line(*_verify(home, bundle)[:2])
    assert "sources/S1.txt is a symbolic link" in line and "not verified" in line

    # A linked directory is refused the same way.
    (bundle / "sources" / "S1.txt").unlink()
    shutil.move(bundle / "sources", home.path / "elsewhere")
    (bundle / "sources").symlink_to(home.path / "elsewhere")
    assert "sources is a symbolic link" in _one_line(*_verify(home, bundle)[:2])


@pytest.mark.parametrize("where", ["sources/S2.txt", "extra.fifo"])
def test_a_fifo_in_a_bundle_directory_is_refused_not_waited_on(home: Home, bundle: Path, where: str) -> None:
    target = bundle / where
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    line = _one_line(*_verify(home, bundle)[:2])
    assert f"{where} is a FIFO" in line


def test_a_device_in_a_bundle_directory_is_refused(home: Home, bundle: Path) -> None:
    target = bundle / "sources" / "S3.txt"
    target.unlink()
    try:
        os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # like /dev/zero: endless if read
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    assert "sources/S3.txt is a character device" in _one_line(*_verify(home, bundle)[:2])


def test_a_socket_in_a_bundle_directory_is_refused(home: Home, bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(bundle)  # a socket's path is limited to 107 bytes: bind it by a relative one
    with socket.socket(socket.AF_UNIX) as server:
        server.bind("s.sock")
        assert "s.sock is a socket" in _one_line(*_verify(home, bundle)[:2])


def _zip_bytes(members: list[tuple[str, bytes | tuple[bytes, int, int]]], *, mode: int = 0o100644) -> bytes:
    """A zip written by hand, so that it can hold what zipfile would not write: a member
    given as (raw deflate data, crc32, size claimed) goes in as it is, names may repeat.
    Plain bytes are stored."""
    body, central = b"", b""
    for name, content in members:
        encoded = name.encode()
        if isinstance(content, bytes):
            method, data, crc, size = 0, content, zlib.crc32(content), len(content)
        else:
            method, (data, crc, size) = 8, content
        header = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(data), size, len(encoded), 0)
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII",
            *(0x02014B50, 0x0314, 20, 0, method, 0, 0x21, crc, len(data), size, len(encoded), 0, 0, 0, 0),
            *(mode << 16, len(body)),
        )
        central += encoded
        body += header + encoded + data
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), len(body), 0)
    return body + central + end


def _bundle_members(bundle: Path) -> dict[str, bytes]:
    return {p.relative_to(bundle).as_posix(): p.read_bytes() for p in sorted(bundle.rglob("*")) if p.is_file()}


BOMB_MIB = 1500


def _deflate_bomb() -> tuple[bytes, int, int]:
    """About 1.5 MB of raw deflate data inflating to 1.5 GB of zeros (1 MiB compressed once,
    its full-flushed block repeated), with its crc32 and size."""
    chunk = bytes(1 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(BOMB_MIB):
        crc = zlib.crc32(chunk, crc)
    return block * BOMB_MIB + compressor.flush(), crc, BOMB_MIB << 20


@pytest.mark.slow
def test_a_zip_bomb_is_refused_with_bounded_memory(home: Home, bundle: Path) -> None:
    members = _bundle_members(bundle)
    manifest = json.loads(members["manifest.json"])
    data, crc, size = _deflate_bomb()
    assert len(data) < 2_000_000
    final = next(f for f in manifest["files"] if f["path"] == "final.md")
    listed_size = final["bytes"]

    # 1. The manifest lists the member at its real size: refused by the cap, nothing inflated.
    final.update(bytes=size, sha256="0" * 64)
    bomb = home.path / "bomb.zip"

    def others() -> list[tuple[str, bytes | tuple[bytes, int, int]]]:
        new = json.dumps(manifest).encode()
        return [(n, new if n == "manifest.json" else c) for n, c in members.items() if n != "final.md"]

    bomb.write_bytes(_zip_bytes([*others(), ("final.md", (data, crc, size))]))
    code, stderr, peak = _verify(home, bomb, limit_memory=True)
    line = _one_line(code, stderr)
    assert f"lists final.md at {size:,} bytes, outside 0 to" in line
    # 2. The manifest lists the original size: the header's size differs, nothing is read.
    final.update(bytes=listed_size)
    bomb.write_bytes(_zip_bytes([*others(), ("final.md", (data, crc, size))]))
    code, stderr, peak2 = _verify(home, bomb, limit_memory=True)
    assert code == 1 and f"final.md: sha256 differs from the manifest (the file was changed: {size:,} bytes" in stderr
    # 3. The header lies (claims the manifest's size): no more than that is inflated.
    bomb.write_bytes(_zip_bytes([*others(), ("final.md", (data, crc, listed_size))]))
    code, stderr, peak3 = _verify(home, bomb, limit_memory=True)
    assert code == 1 and "final.md: " in stderr and "Traceback" not in stderr, stderr
    print(f"peak RSS of --verify: {peak >> 20} / {peak2 >> 20} / {peak3 >> 20} MiB")
    # Peak memory of the verifying process: a Python with the CLI loaded, not the 1.5 GB.
    assert max(peak, peak2, peak3) < 250 * 1024 * 1024, (peak, peak2, peak3)


def test_duplicate_zip_members_are_refused(home: Home, bundle: Path) -> None:
    members = _bundle_members(bundle)
    tampered = members["final.md"].replace(b"Vector", b"Tampered")
    doubled = home.path / "doubled.zip"
    doubled.write_bytes(_zip_bytes([("final.md", tampered), *members.items()]))
    with zipfile.ZipFile(doubled) as archive:  # zipfile's own reading would take the good one
        assert archive.read("final.md") == members["final.md"]
    line = _one_line(*_verify(home, doubled)[:2])
    assert "final.md is in the zip 2 times" in line


def test_a_symlink_member_of_a_zip_is_refused(home: Home, bundle: Path) -> None:
    members = _bundle_members(bundle)
    linked = home.path / "linked.zip"
    linked.write_bytes(_zip_bytes(list(members.items()), mode=0o120777))
    assert "is a symbolic link" in _one_line(*_verify(home, linked)[:2])


def test_an_oversized_manifest_is_refused_before_reading(home: Home, bundle: Path) -> None:
    manifest = bundle / "manifest.json"
    with manifest.open("r+b") as handle:
        handle.truncate(17 * 1024 * 1024)  # a sparse file: no disk spent
    line = _one_line(*_verify(home, bundle)[:2])
    assert "manifest.json is 17,825,792 bytes, more than 16,777,216" in line
