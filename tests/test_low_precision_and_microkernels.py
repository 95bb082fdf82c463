"""Where IREE's RISC-V work happens: int8 (QDQ) and float16 models, the data-tiled microkernel target and
RVA23, through the real onnxruntime quantizer, iree-compile, QEMU and the riscv64 runtime. Bad input is
refused in one line: an unknown CPU feature, a CPU model QEMU lacks, inconsistent quantization parameters."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_rvv.base.errors import CompileFailed, ModelError, RuntimeNotProvided, ToolMissing
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import BUILTIN_TARGETS, Target
from pytest_rvv.judge.checks import check_agreement
from pytest_rvv.judge.gate import check_gate
from pytest_rvv.judge.outcome import PASSED
from pytest_rvv.measure.agreement import measure_agreement
from pytest_rvv.measure.static import analyze
from pytest_rvv.model.model import Model
from pytest_rvv.model.prepare import prepare
from pytest_rvv.session import RvvSession

from .conftest import mlp_model, save_model

MMT4D = BUILTIN_TARGETS["rv64gcv-zvl256b-mmt4d"]
RVA23 = BUILTIN_TARGETS["rva23u64"]
ZVL256 = BUILTIN_TARGETS["rv64gcv-zvl256b"]


def session_for(tmp_path: Path, models: dict) -> tuple[RvvSession, dict[str, Model]]:
    settings = Settings.resolve(lambda option: None, {"models": models}, tmp_path)
    settings = dataclasses.replace(settings, cache_dir=tmp_path / "cache")
    return RvvSession(settings), dict(settings.known_models)


def runner_or_skip(session: RvvSession, target: Target):
    try:
        return session.runner(target)
    except RuntimeNotProvided as exc:
        pytest.skip(str(exc))


def cell_of(session: RvvSession, model, target: Target):
    """``model`` x ``target`` resolved on its runner (skips where no runtime runs the target)."""
    return session.cell(model, target, runner_or_skip(session, target))


MLP_INPUTS = [{"name": "x", "shape": [4, 64], "generator": "normal", "low": 0, "high": 1}]


@pytest.fixture
def mlp_int8(tmp_path):
    mlp_model(tmp_path / "mlp.onnx")
    return session_for(tmp_path, {"mlp-int8": {"path": "mlp.onnx", "inputs": MLP_INPUTS, "preparation": [
        "fix-dims", "quantize-int8"], "tolerance": {"atol": 0, "rtol": 0, "steps": 1}}})


def test_an_int8_model_agrees_with_onnxruntimes_quantized_result_counted_in_quantization_steps(mlp_int8):
    session, models = mlp_int8
    model = models["mlp-int8"]
    prepared = onnx.load(str(session.prepared(model)))
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in prepared.graph.node}
    reference = session.oracle(model)
    assert reference.steps[0] is not None and reference.steps[0] > 0  # the output's DequantizeLinear scale
    agreement = measure_agreement(cell_of(session, model, ZVL256), session.store.root).agreement
    assert agreement.max_steps is not None and agreement.max_steps <= 1
    assert "quantization steps" in agreement.report()


def test_the_reference_of_a_qdq_model_is_its_qdq_arithmetic_not_this_machines_integer_kernels(mlp_int8):
    """onnxruntime's fused int8 kernels differ by CPU (AVX2 without VNNI saturates): no reference may use them."""
    import onnxruntime as ort

    session, models = mlp_int8
    model = models["mlp-int8"]
    path, reference = session.prepared(model), session.oracle(model)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    literal = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    [exact] = literal.run(None, {"x": reference.inputs[0]})
    np.testing.assert_array_equal(reference.outputs[0], exact)


def test_an_output_off_by_two_steps_fails_a_one_step_tolerance(mlp_int8):
    from pytest_rvv.measure.agreement import compare

    session, models = mlp_int8
    model, reference = models["mlp-int8"], session.oracle(models["mlp-int8"])
    shifted = [reference.outputs[0] + 2 * reference.steps[0]]
    agreement = compare(shifted, reference.outputs, model.tolerance, reference.steps)
    assert not agreement.ok and agreement.max_steps == pytest.approx(2)


def test_inconsistent_quantization_parameters_are_refused_in_one_line_naming_the_node(tmp_path):
    scale = numpy_helper.from_array(np.array(0.0, dtype=np.float32), "scale")
    zero = numpy_helper.from_array(np.array(0, dtype=np.int8), "zero")
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"], name="quant_x"),
             helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["y"], name="dequant_x")]
    save_model(tmp_path / "bad.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [scale, zero])
    _, models = session_for(tmp_path, {"bad": {"path": "bad.onnx", "inputs": [{"name": "x", "shape": [4]}]}})
    with pytest.raises(ModelError, match=r"model 'bad': QuantizeLinear 'quant_x' has scale \[0\.0\].*positive"):
        prepare(models["bad"], tmp_path / "cache")


def test_a_float16_model_runs_where_the_vector_unit_has_zvfh(tmp_path):
    mlp_model(tmp_path / "mlp.onnx")
    session, models = session_for(tmp_path, {"mlp-f16": {
        "path": "mlp.onnx", "inputs": MLP_INPUTS, "preparation": ["fix-dims", "float16"],
        "tolerance": {"atol": 1e-3, "rtol": 1e-2}}})
    model = models["mlp-f16"]
    prepared = onnx.load(str(session.prepared(model)))
    assert any(i.data_type == TensorProto.FLOAT16 for i in prepared.graph.initializer)
    assert check_agreement(cell_of(session, model, RVA23), tmp_path).outcome == PASSED


def test_a_bfloat16_model_agrees_with_its_bfloat16_arithmetic_on_rva23(tmp_path):
    """onnxruntime has no bfloat16 MatMul: the reference is the graph in float32 with every bf16 value rounded."""
    mlp_model(tmp_path / "mlp.onnx")
    session, models = session_for(tmp_path, {
        "mlp-bf16": {"path": "mlp.onnx", "inputs": MLP_INPUTS, "preparation": ["fix-dims", "bfloat16"],
                     "tolerance": {"atol": 1e-2, "rtol": 1e-2}},
        "mlp": {"path": "mlp.onnx", "inputs": MLP_INPUTS}})
    model = models["mlp-bf16"]
    prepared = onnx.load(str(session.prepared(model)))
    assert {i.data_type for i in prepared.graph.initializer} == {TensorProto.BFLOAT16}
    [ours], [f32] = session.oracle(model).outputs, session.oracle(models["mlp"]).outputs
    assert ours.dtype == np.float32
    np.testing.assert_array_equal(ours.astype(ml_dtypes.bfloat16).astype(np.float32), ours)  # rounded to bf16
    assert 1e-4 < np.abs(ours - f32).max() < 1e-2  # the rounding is real, and bf16-sized
    assert check_agreement(cell_of(session, model, RVA23), tmp_path).outcome == PASSED


def test_an_operator_that_takes_no_bfloat16_is_refused_in_one_line(tmp_path):
    weight = numpy_helper.from_array(np.ones((2, 1, 3, 3), dtype=np.float32), "w")
    save_model(tmp_path / "conv.onnx", [helper.make_node("Conv", ["x", "w"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 6, 6])], [weight])
    _, models = session_for(tmp_path, {"conv-bf16": {"path": "conv.onnx", "preparation": ["bfloat16"],
                                                     "inputs": [{"name": "x", "shape": [1, 1, 8, 8]}]}})
    with pytest.raises(ModelError, match=r"^model 'conv-bf16': an operator does not take bfloat16 .*Conv") as err:
        prepare(models["conv-bf16"], tmp_path / "cache")
    assert "\n" not in str(err.value)


def test_a_cpu_feature_the_compiler_does_not_know_is_refused_not_ignored(tmp_path):
    mlp_model(tmp_path / "mlp.onnx")
    session, models = session_for(tmp_path, {"mlp": {"path": "mlp.onnx", "inputs": MLP_INPUTS}})
    typo = Target("typo", "riscv64", features=(*ZVL256.features, "+zvfhx"))
    with pytest.raises(CompileFailed, match=r"does not know the CPU feature\(s\) \+zvfhx .*fix the target's features"):
        session.artifact(models["mlp"], typo)


def test_a_cpu_model_qemu_lacks_is_refused_in_one_line(tmp_path):
    session, _ = session_for(tmp_path, {})
    future = Target("rva30", "riscv64", features=ZVL256.features, emulator_cpu="rva30u64,vlen=256")
    with pytest.raises(ToolMissing, match=r"target 'rva30': .* has no CPU model 'rva30u64' \(it has .*rva23u64"):
        session.runner(future)


def test_the_microkernel_target_names_the_mmt4d_tile_each_dispatch_runs_and_counts_it(tmp_path):
    mlp_model(tmp_path / "mlp.onnx")
    session, models = session_for(tmp_path, {"mlp": {"path": "mlp.onnx", "inputs": MLP_INPUTS}})
    artifact = session.artifact(models["mlp"], MMT4D)
    tiles = {name for names in artifact.ukernels.values() for name in names}
    assert tiles and all(name.startswith("iree_uk_mmt4d_tile_f32f32f32_") and name.endswith("_riscv_64_v")
                         for name in tiles)
    snapshot = analyze(artifact).snapshot()
    on_ukernel = {k: d for k, d in snapshot["dispatches"].items() if d.get("ukernels")}
    assert on_ukernel and all(d["vectorized"] for d in on_ukernel.values())
    assert not session.artifact(models["mlp"], ZVL256).ukernels  # the default path carries none


def test_a_microkernel_that_falls_back_to_the_generic_scalar_tile_fails_named():
    entry = {"instructions": 100, "vector": 40, "vectorized": True,
             "ukernels": ["iree_uk_mmt4d_tile_f32f32f32_generic"]}
    current = {"totals": {"instructions": 100, "vector": 40, "vector_share_percent": 40.0},
               "dispatches": {"dispatch_1_matmul_4x8x64_f32": entry}}
    result = check_gate(None, current, MMT4D, max_share_drop=5.0)
    assert result.violations == ["dispatch_1_matmul_4x8x64_f32: its microkernel is the generic scalar tile "
                                 "iree_uk_mmt4d_tile_f32f32f32_generic on a vector target (40 vector of 100 "
                                 "instructions)"]


def test_a_dispatch_that_leaves_its_microkernel_fails():
    def snapshot(ukernels: list[str]) -> dict:
        entry = {"instructions": 100, "vector": 40, "vectorized": True} | ({"ukernels": ukernels} if ukernels else {})
        return {"totals": {"instructions": 100, "vector": 40, "vector_share_percent": 40.0},
                "dispatches": {"dispatch_1_matmul_4x8x64_f32": entry}}

    tile = "iree_uk_mmt4d_tile_f32f32f32_1xXXx1_riscv_64_v"
    result = check_gate(snapshot([tile]), snapshot([]), MMT4D, max_share_drop=5.0)
    assert result.regressions == [f"dispatch_1_matmul_4x8x64_f32: ran on microkernel {tile}, now on none "
                                  "(40 vector of 100 instructions -> 40 vector of 100 instructions)"]
    assert check_gate(snapshot([tile]), snapshot([tile]), MMT4D, max_share_drop=5.0).ok
