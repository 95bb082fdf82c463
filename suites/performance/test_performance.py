"""Time, memory, sizes and instruction counts per model x target, against baselines/performance/."""

import pytest


@pytest.mark.rvv_check("performance")
def test_no_slower_or_bigger(rvv_performance):
    rvv_performance()
