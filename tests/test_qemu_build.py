"""The QEMU scripts/setup.sh builds: for x86-64-v3 where the host runs it (docs/ci.md, "QEMU built for the host's
vector ISA": QEMU's float helpers otherwise pay an SSE/AVX transition per call), and saying which it is."""

import subprocess
from pathlib import Path

import pytest

from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.run.qemu import Qemu, find_qemu


def host_runs_x86_64_v3() -> bool:
    loader = Path("/lib64/ld-linux-x86-64.so.2")
    if not loader.is_file():
        return False
    return "x86-64-v3 (supported" in subprocess.run([str(loader), "--help"], capture_output=True, text=True).stdout


def test_setup_builds_qemu_for_x86_64_v3_where_the_host_runs_it():
    qemu = find_qemu("riscv64")
    if qemu.build_cflags is None:
        pytest.skip(f"{qemu.path} was not built by scripts/setup.sh (no build-cflags beside its bin/)")
    assert qemu.build_cflags == ("-march=x86-64-v3" if host_runs_x86_64_v3() else "")


def test_a_build_says_its_flags_and_one_setup_did_not_make_says_nothing(tmp_path):
    (tmp_path / "bin").mkdir()
    qemu = Qemu("riscv64", tmp_path / "bin" / "qemu-riscv64", (10, 0, 2))
    assert qemu.build_cflags is None
    (tmp_path / "build-cflags").write_text("cflags=\n")
    assert qemu.build_cflags == ""
    (tmp_path / "build-cflags").write_text("cflags=-march=x86-64-v3\n")
    assert qemu.build_cflags == "-march=x86-64-v3"


def test_a_build_for_an_isa_level_this_cpu_lacks_is_refused_in_one_line(tmp_path):
    """A cache restored on a machine without AVX2 would hold a QEMU that dies on an illegal instruction mid-run."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "qemu-riscv64").symlink_to(find_qemu("riscv64").path)
    (tmp_path / "build-cflags").write_text("cflags=-march=x86-64-v9\n")  # a level no CPU runs yet
    with pytest.raises(ToolMissing) as refused:
        find_qemu("riscv64", tmp_path / "bin")
    assert str(refused.value).count("\n") == 0
    assert "built for x86-64-v9" in str(refused.value) and "bash scripts/setup.sh qemu" in str(refused.value)
    (tmp_path / "build-cflags").write_text("cflags=\n")  # portable: runs anywhere
    assert find_qemu("riscv64", tmp_path / "bin").version >= (9, 0)
    if host_runs_x86_64_v3():
        (tmp_path / "build-cflags").write_text("cflags=-march=x86-64-v3\n")
        assert find_qemu("riscv64", tmp_path / "bin").version >= (9, 0)
