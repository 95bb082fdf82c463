"""Every selected model compiles for every selected target (riscv64 too, without a runtime)."""

import pytest

from pytest_rvv.judge.checks import check_compiles


@pytest.mark.rvv_check("compile")
def test_compiles(rvv_session, rvv_model, rvv_target, rvv_judge):
    rvv_judge(check_compiles(rvv_session, rvv_model, rvv_target))
