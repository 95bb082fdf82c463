"""Dispatches are matched across compiles by what they compute, so a renumbering is never a change."""

from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.judge.gate import check_gate
from pytest_rvv.measure.matching import computes, match_dispatches
from tests.test_gate import record

RVV = BUILTIN_TARGETS["rv64gcv-zvl256b"]


def test_the_computation_is_the_name_without_its_index():
    assert computes("dispatch_13_batch_matmul_4x64x64_f32") == "batch_matmul_4x64x64_f32"
    assert computes("dispatch_7") == "dispatch_7"  # nothing but an index: only the same key matches


def test_renumbered_dispatches_pair_by_computation_in_index_order():
    before = ["dispatch_0_slow_memcpy", "dispatch_3_conv_8x8_f32", "dispatch_12_matmul_4x4_f32",
              "dispatch_13_matmul_4x4_f32", "dispatch_14_softmax_4_f32"]
    after = ["dispatch_0_slow_memcpy", "dispatch_2_conv_8x8_f32", "dispatch_11_matmul_4x4_f32",
             "dispatch_12_matmul_4x4_f32", "dispatch_13_add_4_f32"]
    matching = match_dispatches(dict.fromkeys(before), dict.fromkeys(after))
    assert matching.pairs == [
        ("dispatch_0_slow_memcpy", "dispatch_0_slow_memcpy"),
        ("dispatch_3_conv_8x8_f32", "dispatch_2_conv_8x8_f32"),
        ("dispatch_13_matmul_4x4_f32", "dispatch_11_matmul_4x4_f32"),
        ("dispatch_12_matmul_4x4_f32", "dispatch_12_matmul_4x4_f32"),
    ]
    assert matching.removed == ["dispatch_14_softmax_4_f32"]
    assert matching.added == ["dispatch_13_add_4_f32"]


def test_a_renumbering_alone_passes_the_gate_and_a_real_change_is_named_by_the_dispatch():
    before = record(dispatch_3_conv_8x8_f32=(40, 100), dispatch_4_matmul_4x4_f32=(50, 100))
    renumbered = record(dispatch_2_conv_8x8_f32=(40, 100), dispatch_3_matmul_4x4_f32=(50, 100))
    result = check_gate(before, renumbered, RVV, 5.0, work=True)
    assert result.ok and not result.work
    assert any("2 dispatches renumbered" in line for line in result.changes)
    slower = record(dispatch_2_conv_8x8_f32=(40, 100), dispatch_3_matmul_4x4_f32=(0, 400))
    result = check_gate(before, slower, RVV, 100.0, work=True)
    assert result.regressions == [
        "dispatch_4_matmul_4x4_f32 -> dispatch_3_matmul_4x4_f32: was vectorized (50 vector of 100 instructions), "
        "now scalar (0 vector of 400 instructions)",
        "dispatch_4_matmul_4x4_f32 -> dispatch_3_matmul_4x4_f32: executes 100 -> 400 instructions (+300, +300.0%)",
    ]
