"""Static RVV analysis of every model x target, snapshotted, with the "still vectorized" gate."""

import pytest


@pytest.mark.rvv_archs("riscv64", "aarch64")
@pytest.mark.rvv_check("compile")
def test_still_vectorized(rvv_vectorization):
    rvv_vectorization()
