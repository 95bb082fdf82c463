"""The silicon estimator (llvm-mca's model of each core) per instruction, against published measurements of the
core (rvv-bench on SpacemiT X60): an estimate is only as good as its cycles per instruction."""

import pytest

from pytest_rvv.measure.calibration import MODEL_ERRORS, PUBLISHED_INSTRUCTIONS

TIMINGS = [pytest.param(t, id=f"{t.core}-{t.name}", marks=[pytest.mark.xfail(strict=True, reason=reason)]
                        if (reason := MODEL_ERRORS.get((t.core, t.name))) else [])
           for t in PUBLISHED_INSTRUCTIONS]


@pytest.mark.parametrize("timing", TIMINGS)
def test_estimated_cycles_per_instruction_agree_with_silicon(timing, rvv_instruction_calibration):
    rvv_instruction_calibration(timing)
