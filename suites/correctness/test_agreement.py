"""Every selected model's outputs on every selected target agree with onnxruntime's."""

import pytest

from pytest_rvv.judge.checks import check_agreement


@pytest.mark.rvv_check("agreement")
def test_matches_onnxruntime(rvv_cell, tmp_path, rvv_judge):
    rvv_judge(check_agreement(rvv_cell(), tmp_path))
