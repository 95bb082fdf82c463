"""pytest-rvv doctor: every tool with its version, and a non-zero exit with the fix when missing."""

import subprocess
import sys
from pathlib import Path

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
