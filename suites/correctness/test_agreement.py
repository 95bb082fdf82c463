"""Every selected model's outputs on every selected target agree with onnxruntime's."""

import pytest

from pytest_rvv.checks import check_agreement


@pytest.mark.rvv_check("agreement")
def test_matches_onnxruntime(rvv_session, rvv_model, rvv_runner, tmp_path):
    check_agreement(rvv_session, rvv_model, rvv_runner, tmp_path)
