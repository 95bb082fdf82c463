"""Executed instructions per dispatch (QEMU + the rvv_counter plugin), snapshotted and gated.

Static counts say what code exists; these say what ran. Counts inside the dispatches are exact
(one thread, local-sync), so the snapshot is deterministic; runtime code outside them is not
recorded (it varies by a few hundred instructions between runs).
"""

import pytest


@pytest.mark.rvv_archs("riscv64", "aarch64")
@pytest.mark.rvv_check("agreement")
def test_still_vectorized_when_run(rvv_executed_vectorization):
    rvv_executed_vectorization()
