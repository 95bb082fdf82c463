"""Numeric comparison: error figures, mismatch counts and worst positions."""

import numpy as np

from pytest_rvv.measure.agreement import compare
from pytest_rvv.model.model import Tolerance


def test_identical_outputs_agree():
    a = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)
    result = compare([a], [a.copy()], Tolerance())
    assert result.ok and result.max_abs == 0.0


def test_disagreement_reports_errors_share_and_worst_positions():
    expected = np.zeros((2, 5), dtype=np.float32)
    actual = expected.copy()
    actual[1, 3] = 0.5
    actual[0, 0] = 0.01
    result = compare([actual], [expected], Tolerance(atol=1e-3, rtol=0))
    assert not result.ok
    out = result.outputs[0]
    assert (out.mismatches, out.size) == (2, 10)
    assert out.max_abs == 0.5
    assert out.worst[0][0] == (1, 3)
    report = result.report()
    assert "2/10 elements mismatch (20.00%)" in report
    assert "[1, 3] got 0.5 want 0" in report


def test_relative_tolerance_scales_with_magnitude():
    expected = np.array([1000.0, 1.0], dtype=np.float32)
    actual = np.array([1000.5, 1.0005], dtype=np.float32)
    assert compare([actual], [expected], Tolerance(atol=0, rtol=1e-3)).ok


def test_shape_mismatch_and_output_count_are_failures():
    assert not compare([np.zeros(3)], [np.zeros(4)], Tolerance()).ok
    assert "got 1 outputs, onnxruntime gave 2" in compare([np.zeros(3)], [np.zeros(3)] * 2, Tolerance()).report()


def test_nan_where_reference_is_finite_is_a_mismatch():
    result = compare([np.array([np.nan, 1.0])], [np.array([0.0, 1.0])], Tolerance())
    assert result.outputs[0].mismatches == 1


def test_equal_infinities_agree_and_opposite_ones_do_not():
    inf = np.array([np.inf, -np.inf, 1.0])
    assert compare([inf], [inf.copy()], Tolerance()).ok
    assert compare([-inf], [inf], Tolerance()).outputs[0].mismatches == 3
