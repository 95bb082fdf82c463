"""Two toolchains side by side (only with --rvv-compare=SPEC; deselected otherwise).

    pytest suites/performance/test_toolchains.py --rvv-compare=iree-base-compiler==3.12.0 -n auto

Every model x target is compiled, checked against onnxruntime and measured with both; a test
fails, naming the dispatches, when the toolchain under test executes more work than the
reference beyond --rvv-added-work.
"""


def test_toolchain_under_test_adds_no_work(rvv_toolchain_comparison):
    rvv_toolchain_comparison()
