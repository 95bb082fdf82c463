"""ONNX backend node tests (onnx 1.22.0) on every target: import, compile, run, compare.

A small cross-section by default; --rvv-ops=all (or globs such as conv*,test_add) for more.
"""


def test_onnx_node(rvv_conformance):
    rvv_conformance()
