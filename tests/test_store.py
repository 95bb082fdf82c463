"""The content-addressed store: one build per key across processes, no partial entries."""

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from pytest_rvv.base.store import Store, content_sha, digest, file_sha256


def _slow_build(root: str, key: str, log: str) -> str:
    def build(tmp: Path) -> dict:
        with open(log, "a") as f:
            f.write("built\n")
        time.sleep(0.5)  # long enough for the other process to arrive while this one builds
        (tmp / "data.bin").write_bytes(b"x" * 1000)
        return {"by": "worker"}

    entry = Store(Path(root)).get_or_build("ns", key, build)
    return (entry.path / "data.bin").read_bytes().decode()


def test_two_processes_asking_for_the_same_key_build_it_once(tmp_path):
    log = tmp_path / "builds.log"
    key = digest(["same"])
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.starmap(_slow_build, [(str(tmp_path / "cache"), key, str(log))] * 2)
    assert results == ["x" * 1000] * 2
    assert log.read_text() == "built\n"


def test_entry_is_reused_and_reports_it(tmp_path):
    store = Store(tmp_path)
    calls = []

    def build(tmp: Path) -> dict:
        calls.append(1)
        (tmp / "f").write_text("hello")
        return {"n": 1}

    first = store.get_or_build("ns", digest(["k"]), build)
    second = store.get_or_build("ns", digest(["k"]), build)
    assert (first.created, second.created) == (True, False)
    assert len(calls) == 1 and second.meta == {"n": 1}


def write_hello(tmp: Path) -> dict:
    """An entry's build: one file, ``f``, holding ``hello``."""
    (tmp / "f").write_text("hello")
    return {}


def test_corrupt_entry_is_detected_and_rebuilt(tmp_path):
    store = Store(tmp_path)
    key = digest(["k"])

    entry = store.get_or_build("ns", key, write_hello)
    (entry.path / "f").write_text("hellO")  # same size, different content
    assert store.lookup("ns", key) is None
    rebuilt = store.get_or_build("ns", key, write_hello)
    assert rebuilt.created and (rebuilt.path / "f").read_text() == "hello"


def test_failed_build_publishes_nothing(tmp_path):
    store = Store(tmp_path)

    def build(tmp: Path) -> dict:
        (tmp / "half").write_text("partial")
        raise RuntimeError("compiler died")

    with pytest.raises(RuntimeError):
        store.get_or_build("ns", digest(["k"]), build)
    assert store.lookup("ns", digest(["k"])) is None
    leftovers = [p for p in (tmp_path / "ns").rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert leftovers == []


def test_manifest_lists_every_file_with_its_hash(tmp_path):
    def build(tmp: Path) -> dict:
        (tmp / "a").write_text("1")
        (tmp / "b").write_text("22")
        return {"meta": True}

    entry = Store(tmp_path).get_or_build("ns", digest(["k"]), build)
    manifest = json.loads((entry.path / "manifest.json").read_text())
    assert sorted(manifest["files"]) == ["a", "b"]
    assert manifest["files"]["b"]["size"] == 2


def test_a_console_script_is_keyed_by_what_it_runs_not_by_the_environment_it_lives_in(tmp_path):
    """The importer's path held the checkout's .venv: every clone (and every CI workspace) imported anew."""
    from pytest_rvv.compile.compiler import _script_identity

    body = "import sys\nfrom iree.compiler.tools.import_onnx.__main__ import _cli_main\nsys.exit(_cli_main())\n"
    here, there = tmp_path / "a" / "iree-import-onnx", tmp_path / "b" / "iree-import-onnx"
    for path, python in ((here, "/work/main/.venv/bin/python"), (there, "/check/clone/.venv/bin/python")):
        path.parent.mkdir()
        path.write_text(f"#!{python}\n{body}")
    assert _script_identity(here) == _script_identity(there)
    there.write_text(f"#!/check/clone/.venv/bin/python\n{body}# another importer\n")
    assert _script_identity(here) != _script_identity(there)


def test_a_file_rewritten_within_the_timestamp_granularity_is_hashed_again(tmp_path):
    path = tmp_path / "module.vmfb"
    path.write_bytes(b"a" * 64)
    before = path.stat()
    first = content_sha(path)
    path.write_bytes(b"b" * 64)  # same size, same inode
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # and, as a coarse clock may leave it, same mtime
    assert content_sha(path) == file_sha256(path) != first


def test_an_entry_verified_once_is_trusted_by_its_files_stat_until_one_is_written(tmp_path, monkeypatch):
    """Each process hashed every file of every entry it looked up (about 2 s of a rerun's 12 s per worker); an
    entry whose files hashed to their manifest keeps their stat in ``.verified``, and a write moves the change time."""
    import pytest_rvv.base.store as store_module

    monkeypatch.setattr(store_module, "SETTLED_S", 0.02)
    hashed: list[str] = []
    real = store_module.file_sha256
    monkeypatch.setattr(store_module, "file_sha256", lambda path: hashed.append(path.name) or real(path))
    store = Store(tmp_path)
    key = digest(["k"])

    entry = store.get_or_build("ns", key, write_hello)
    time.sleep(0.1)

    def fresh_lookup() -> bool:  # as a new process does: nothing remembered in memory
        store_module._HASHED.clear()
        hashed.clear()
        return store.lookup("ns", key) is not None

    assert fresh_lookup() and hashed == ["f"] and (entry.path / ".verified").is_file()
    assert fresh_lookup() and hashed == []  # trusted by stat
    before = (entry.path / "f").stat()
    (entry.path / "f").write_text("hellO")  # same size
    os.utime(entry.path / "f", ns=(before.st_atime_ns, before.st_mtime_ns))  # and the same modification time
    assert not fresh_lookup() and hashed == ["f"]


def test_the_hash_of_a_verified_entrys_file_is_its_manifests_until_the_file_or_the_manifest_is_written(
        tmp_path, monkeypatch):
    """Every session hashed each model's source and prepared graph for the cache keys of its import and reference
    (alexnet's is 248 MB; a warm inner session of 22 models spent 1.5 of its 4.9 s there): a file of an entry that was
    looked up and trusted by its ``.verified`` takes its manifest's hash, read from nothing else."""
    import pytest_rvv.base.store as store_module

    monkeypatch.setattr(store_module, "SETTLED_S", 0.02)
    hashed: list[str] = []
    real = store_module.file_sha256
    monkeypatch.setattr(store_module, "file_sha256", lambda path: hashed.append(path.name) or real(path))
    store = Store(tmp_path)
    entry = store.get_or_build("ns", digest(["k"]), write_hello)
    time.sleep(0.1)
    assert store.lookup("ns", entry.key) is not None  # verified: .verified written
    store_module._HASHED.clear()  # as a new process: it looks the entry up, then asks its file's hash
    hashed.clear()
    assert store.lookup("ns", entry.key) is not None
    assert content_sha(entry.file("f")) == real(entry.file("f")) and hashed == []

    manifest = entry.path / "manifest.json"  # a manifest written since it was verified is not believed
    manifest.write_text(manifest.read_text().replace(real(entry.file("f")), "0" * 64))
    store_module._HASHED.clear()
    assert store.lookup("ns", entry.key) is None
    assert content_sha(entry.file("f")) == real(entry.file("f")) and hashed == ["f"]

    outside = tmp_path / "f"  # a file in no entry is hashed
    outside.write_text("hello")
    hashed.clear()
    assert content_sha(outside) == real(outside) and hashed == ["f"]
