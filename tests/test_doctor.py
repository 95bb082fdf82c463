"""pytest-rvv doctor: every tool with its version, and a non-zero exit with the fix when missing."""

import subprocess
import sys
from pathlib import Path

import pytest

DOCTOR = [str(Path(sys.executable).parent / "pytest-rvv"), "doctor"]


def test_doctor_reports_every_tool_with_its_version():
    proc = subprocess.run(DOCTOR, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("iree-compile", "iree-import-onnx", "qemu-riscv64", "qemu-aarch64", "riscv64-linux-gnu-objdump",
                 "arm64 cross libraries", "iree-run-module (aarch64)", "iree-run-module (riscv64)"):
        assert name in proc.stdout
    assert "IREE compiler version 3.13.0" in proc.stdout
    assert "ready: `pytest suites/ -n auto` can run" in proc.stdout


def test_doctor_fails_and_says_how_to_fix_a_missing_qemu(tmp_path):
    proc = subprocess.run([*DOCTOR, f"--rvv-qemu-dir={tmp_path}"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert f"MISSING  qemu-riscv64                --rvv-qemu-dir {tmp_path}: no qemu-riscv64 there" in proc.stdout
    assert "fix: bash scripts/setup.sh qemu" in proc.stdout




def test_doctor_says_which_peer_is_fetched_without_fetching_one(tmp_path):
    """An empty tools folder: no peer is there and asking fetches nothing; the setup's tools folder: a line per peer,
    each there with what it holds (or absent with setup's peers step as the fix)."""
    from pytest_rvv.run.peer import PEERS

    assert {name: peer.fetched(tmp_path) for name, peer in PEERS.items()} == dict.fromkeys(PEERS)
    assert not any(tmp_path.iterdir())  # nothing fetched into it
    mine = subprocess.run(DOCTOR, capture_output=True, text=True, timeout=600).stdout
    lines = {x.split()[2]: x for x in mine.splitlines() if x.split()[1:2] == ["peer:"]}
    assert sorted(lines) == sorted(PEERS)
    for line in lines.values():
        assert line.startswith("ok") or ("not fetched" in line and line.startswith("absent")), line
    assert mine.count("fix: bash scripts/setup.sh peers") == sum(x.startswith("absent") for x in lines.values())
    if lines["ncnn"].startswith("absent"):
        pytest.skip("ncnn is not in the setup's tools folder: 'bash scripts/setup.sh peers' could not fetch it")
    assert "ncnn 1.0.20261020 and pnnx 20261020 in Python 3.13" in lines["ncnn"], lines["ncnn"]
