"""The Llama-style decoder built in code: a prefill graph and a KV-cache decode step that continues it exactly,
and its weight-only int8 variant, checked with onnxruntime (the IREE runs are the suites' cells)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from pytest_rvv.model.builders import BUILDERS
from pytest_rvv.model.builders.decoder import (
    QWEN_2_5_0_5B_LAYER,
    REAL_CACHE,
    REAL_PREFILL,
    TOY,
    decode_graph,
    prefill_graph,
)
from pytest_rvv.run.onnxruntime import onnxruntime_outputs, reference_level

PREFILL, CAPACITY = 8, 16


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], level: str = "ORT_ENABLE_BASIC") -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize(("int8w", "dims"), [(False, TOY), (True, TOY), (False, QWEN_2_5_0_5B_LAYER)],
                         ids=["toy", "toy-int8w", "qwen2.5-0.5b-layer"])
def test_a_decode_step_continues_the_prefill_through_its_kv_cache(int8w, dims):
    """At the toy's dims and at Qwen2.5-0.5B's real ones (GQA of 14 query heads over 2 KV heads of 64)."""
    tokens = np.random.default_rng(3).integers(0, dims.vocab, (1, PREFILL + 1)).astype(np.int64)
    _, keys, values = run(prefill_graph(PREFILL, 0, int8w, dims), {"input_ids": tokens[:, :PREFILL]})
    whole, _, _ = run(prefill_graph(PREFILL + 1, 0, int8w, dims), {"input_ids": tokens})
    past_keys = np.full((dims.layers, 1, dims.kv_heads, CAPACITY, dims.head_dim), 99.0, dtype=np.float32)
    past_values = past_keys.copy()
    past_keys[:, :, :, :PREFILL], past_values[:, :, :, :PREFILL] = keys, values
    logits, new_keys, _ = run(decode_graph(CAPACITY, 0, int8w, dims), {
        "input_ids": tokens[:, PREFILL:], "position": np.array([PREFILL]), "past_keys": past_keys,
        "past_values": past_values})
    np.testing.assert_allclose(logits[0, 0], whole[0, PREFILL], atol=1e-5 if dims is TOY else 1e-4)
    np.testing.assert_array_equal(new_keys[:, :, :, :PREFILL], keys)  # the past is kept
    assert not np.allclose(new_keys[:, :, :, PREFILL], 99.0)  # the new token's key is written at its slot
    np.testing.assert_array_equal(new_keys[:, :, :, PREFILL + 1:], 99.0)


def test_int8_weights_move_the_logits_a_little():
    ids = {"input_ids": np.arange(PREFILL, dtype=np.int64)[None]}
    f32, int8w = run(prefill_graph(PREFILL, 0), ids)[0], run(prefill_graph(PREFILL, 0, True), ids)[0]
    assert 0 < np.abs(f32 - int8w).max() < 0.1 * np.abs(f32).max()


def test_the_reference_of_a_weight_only_int8_model_is_its_exact_arithmetic(tmp_path):
    """onnxruntime's extended optimizations quantize the activations of DequantizeLinear -> MatMul: not the model."""
    path = tmp_path / "m.onnx"
    onnx.save(prefill_graph(PREFILL, 0, True), str(path))
    ids = [np.arange(PREFILL, dtype=np.int64)[None]]
    basic = onnxruntime_outputs(path, ["input_ids"], ids, "basic")[0]
    fused = onnxruntime_outputs(path, ["input_ids"], ids, "all")[0]
    exact = run(prefill_graph(PREFILL, 0, True), {"input_ids": ids[0]}, level="ORT_DISABLE_ALL")[0]
    assert np.abs(fused - basic).max() > 1e-3 > 1e-5 > np.abs(exact - basic).max()
    assert reference_level(path) == "basic"


@pytest.mark.parametrize("name", [n for n in BUILDERS if n.startswith("llama")])
def test_the_registered_graphs_are_valid_seeded_and_match_their_inputs(name):
    builder = BUILDERS[name]
    model = builder.build("ci", 0)
    onnx.checker.check_model(model)
    assert model.SerializeToString() == builder.build("ci", 0).SerializeToString()
    declared = {i.name: tuple(d.dim_value for d in i.type.tensor_type.shape.dim) for i in model.graph.input}
    assert declared == {spec.name: spec.shape for spec in builder.inputs("ci")}


def test_the_real_shaped_layers_have_the_published_dims_and_are_not_run_unless_named():
    from pytest_rvv.model.registry import builtin_models

    model = BUILDERS["qwen2.5-0.5b-layer-decode"].build("ci", 0)
    shapes = {tuple(i.dims) for i in model.graph.initializer}
    assert {(896, 896), (896, 128), (896, 4864), (4864, 896), (256, 896), (896, 256)} <= shapes
    inputs = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    assert inputs["past_keys"] == [1, 1, 2, REAL_CACHE, 64]
    prefill = BUILDERS["llama-3.2-1b-layer-prefill"].inputs("ci")
    assert prefill[0].shape == (1, REAL_PREFILL)
    models = builtin_models("ci")
    assert not models["llama-3.2-1b-layer-decode"].selected and models["llama-decode"].selected
    assert "llama-3.2-1b-layer-decode" in builtin_models("full")  # the same model at either size


def test_real_layers_names_every_model_not_run_by_default():
    from pathlib import Path

    from pytest_rvv.config.settings import Settings

    def given(name):
        return lambda option: (name, Path.cwd()) if option.name == "models" else None

    chosen = [m.name for m in Settings.resolve(given("real-layers"), {}, Path.cwd()).models]
    assert chosen[:2] == ["llama-3.2-1b-layer-prefill", "llama-3.2-1b-layer-prefill-int8w"]
    assert {"qwen2.5-0.5b-layer-decode-bf16", "llama-3.2-1b-layer-decode"} <= set(chosen) and len(chosen) == 10
    default = [m.name for m in Settings.resolve(lambda option: None, {}, Path.cwd()).models]
    assert not set(chosen) & set(default)
