"""A reproducer's check.py runs on a stock python3 (no numpy) and judges outputs as pytest-rvv's agreement check does.

The reproducer end to end (real compilers, QEMU, Debian's /usr/bin/python3 on PATH) is in
test_toolchain_comparison.py; this covers the .npy dtypes and layouts check.py reads, against numpy's own files.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pytest_rvv.comparison.repro import _check
from pytest_rvv.measure.agreement import compare
from pytest_rvv.model.model import Tolerance

STOCK_PYTHON = Path("/usr/bin/python3")  # Debian's own interpreter: what a machine without pytest-rvv has
pytestmark = pytest.mark.skipif(not STOCK_PYTHON.is_file(), reason="no /usr/bin/python3")


def run_check(folder: Path, expected: list[np.ndarray], got: list[np.ndarray], tolerance: Tolerance,
              steps: tuple[float | None, ...] = ()) -> subprocess.CompletedProcess[str]:
    """check.py on these outputs, under the stock python3 without site-packages (-S: numpy cannot be imported)."""
    (folder / "side").mkdir(parents=True)
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        np.save(folder / f"expected_{i}.npy", e, allow_pickle=False)
        np.save(folder / "side" / f"output_{i}.npy", g, allow_pickle=False)
    (folder / "check.py").write_text(_check(tolerance, steps))
    return subprocess.run([str(STOCK_PYTHON), "-I", "-S", "check.py", "side"], cwd=folder, capture_output=True,
                          text=True, timeout=60, check=False)


def test_stock_python_cannot_import_numpy_the_way_check_runs():
    probe = subprocess.run([str(STOCK_PYTHON), "-I", "-S", "-c", "import numpy"], capture_output=True, text=True,
                           check=False)
    assert "No module named 'numpy'" in probe.stderr


RNG = np.random.default_rng(7)
CASES = {
    "float32": RNG.standard_normal((3, 5)).astype(np.float32),
    "float16": RNG.standard_normal((4, 4)).astype(np.float16),
    "float64 big-endian": RNG.standard_normal(6).astype(">f8"),
    "float32 fortran": np.asfortranarray(RNG.standard_normal((2, 3, 4)).astype(np.float32)),
    "int8": RNG.integers(-128, 128, (2, 8)).astype(np.int8),
    "uint8": RNG.integers(0, 256, 9).astype(np.uint8),
    "int32": RNG.integers(-(2 ** 31), 2 ** 31, (3, 3)).astype(np.int32),
    "int64": RNG.integers(-(2 ** 40), 2 ** 40, 7).astype(np.int64),
    "bool": RNG.integers(0, 2, (2, 5)).astype(bool),
    "scalar": np.array(1.5, dtype=np.float32),
    "nan and inf": np.array([np.nan, np.inf, -np.inf, 0.0], dtype=np.float32),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_identical_outputs_of_every_dtype_agree(tmp_path, name):
    array = CASES[name]
    result = run_check(tmp_path, [array], [array.copy(order="K")], Tolerance())
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["side: output_0.npy max abs error vs onnxruntime 0",
                                          "all outputs agree with onnxruntime (atol=0.0001 rtol=0.001)"]


def test_a_column_major_output_is_read_in_the_same_element_order(tmp_path):
    expected = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    result = run_check(tmp_path / "same", [expected], [np.asfortranarray(expected)], Tolerance())
    assert result.returncode == 0, result.stdout
    shifted = run_check(tmp_path / "shifted", [expected], [np.asfortranarray(expected.reshape(4, 3, 2).T)],
                        Tolerance(atol=0.0, rtol=0.0))
    assert shifted.returncode == 1, shifted.stdout  # same bytes in C order, other elements: a reader that ignores
    # fortran_order would take it for equal


@pytest.mark.parametrize("name", sorted(set(CASES) - {"bool", "scalar", "nan and inf"}))
def test_a_perturbed_element_fails_and_is_counted_as_pytest_rvv_counts_it(tmp_path, name):
    expected = CASES[name]
    got = expected.copy(order="K")
    where = np.unravel_index(3, got.shape)
    got[where] = (0 if got[where] else 1) if got.dtype.kind in "iu" else got[where] + 0.5  # beyond rtol of any int
    agreement = compare([got], [expected], Tolerance())
    result = run_check(tmp_path, [expected], [got], Tolerance())
    assert result.returncode == 1
    [line] = result.stdout.splitlines()
    assert line == (f"side: output_0.npy max abs error vs onnxruntime {agreement.max_abs:.3g}, "
                    f"{agreement.outputs[0].mismatches}/{expected.size} elements beyond the tolerance")
    assert agreement.outputs[0].mismatches == 1
    assert result.stderr == "disagrees with onnxruntime (atol=0.0001 rtol=0.001): side/output_0.npy\n"


def test_counts_and_maxima_match_pytest_rvv_near_the_tolerance(tmp_path):
    """Errors spread around atol + rtol * |expected|, NaN and infinities: the same elements fail as in pytest-rvv."""
    tolerance = Tolerance(atol=1e-3, rtol=1e-2)
    expected = RNG.standard_normal(4000).astype(np.float32)
    got = (expected + RNG.standard_normal(4000) * (1e-3 + 1e-2 * np.abs(expected))).astype(np.float32)
    expected[:4], got[:4] = [np.nan, np.inf, 1.0, np.nan], [np.nan, np.inf, np.nan, 2.0]
    agreement = compare([got], [expected], tolerance).outputs[0]
    result = run_check(tmp_path, [expected], [got], tolerance)
    assert result.returncode == 1
    bad = re.fullmatch(r"side: output_0\.npy max abs error vs onnxruntime (\S+), (\d+)/4000 elements beyond the "
                       r"tolerance", result.stdout.splitlines()[0])
    assert bad is not None, result.stdout
    assert (bad[1], int(bad[2])) == (f"{agreement.max_abs:.3g}", agreement.mismatches)
    assert 2 < agreement.mismatches < 3000  # both sides of the boundary are exercised


def test_int8_outputs_get_their_quantization_steps(tmp_path):
    expected = np.array([10, 20, 30], dtype=np.int8)
    got = np.array([11, 18, 30], dtype=np.int8)  # one and two steps off
    tolerance = Tolerance(atol=0.0, rtol=0.0, steps=2)
    assert run_check(tmp_path / "scaled", [expected], [got], tolerance, steps=(1.0,)).returncode == 0
    strict = run_check(tmp_path / "one-step", [expected], [got], Tolerance(atol=0.0, rtol=0.0, steps=1), steps=(1.0,))
    assert strict.returncode == 1
    assert strict.stdout.startswith("side: output_0.npy max abs error vs onnxruntime 2, 1/3 elements beyond")


def test_a_missing_or_reshaped_output_fails(tmp_path):
    expected = [np.zeros((2, 3), np.float32), np.zeros(4, np.float32)]
    got = [np.zeros((3, 2), np.float32), np.zeros(4, np.float32)]
    result = run_check(tmp_path, expected, got, Tolerance())
    (tmp_path / "side" / "output_1.npy").unlink()
    again = subprocess.run([str(STOCK_PYTHON), "-I", "-S", "check.py", "side"], cwd=tmp_path, capture_output=True,
                           text=True, check=False)
    assert result.returncode == again.returncode == 1
    assert result.stdout.splitlines()[0] == "side: output_0.npy is f4[3, 2], onnxruntime's is f4[2, 3]"
    assert "side: output_1.npy missing" in again.stdout.splitlines()
