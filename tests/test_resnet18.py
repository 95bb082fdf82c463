"""ResNet18, the studies' architecture: torchvision's layout and parameter count, outputs that follow the input, an
int8 QDQ twin made by the project's quantizer, and a selection of its own (never in the default run).

onnx, onnxruntime and the settings only; its IREE cells run with ``--rvv-models=studies`` (docs/models-and-targets.md).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper, shape_inference

from pytest_rvv.config.settings import Settings
from pytest_rvv.model.builders import BUILDERS
from pytest_rvv.model.prepare import prepare
from pytest_rvv.model.registry import STUDIES, builtin_models

from .conftest import USER_CACHE, models_listing

TORCHVISION_PARAMETERS = 11_689_512  # sum(p.numel() for p in torchvision.models.resnet18().parameters())


@functools.cache
def resnet18(seed: int = 0) -> onnx.ModelProto:
    return BUILDERS["resnet18"].build("ci", seed)


def ops(model: onnx.ModelProto, op: str) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == op]


def attr(node: onnx.NodeProto, name: str) -> object:
    return next(onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == name)


def weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def outputs(model: onnx.ModelProto, seed: int) -> np.ndarray:
    spec = builtin_models("ci")["resnet18"]
    feeds = {spec.inputs[0].name: spec.inputs[0].generate(np.random.default_rng(seed))}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def test_resnet18_is_torchvisions_layout_with_batchnorm_folded():
    model = resnet18()
    convs, w = ops(model, "Conv"), weights(model)
    assert len(convs) == 20 and len(ops(model, "Gemm")) == 1 and not ops(model, "BatchNormalization")
    assert all(len(c.input) == 3 for c in convs), "every conv carries its folded BatchNorm as a bias"
    stem = convs[0]
    assert stem.input[0] == "input" and w[stem.input[1]].shape == (64, 3, 7, 7)
    assert attr(stem, "strides") == [2, 2] and attr(stem, "pads") == [3] * 4
    (pool,) = ops(model, "MaxPool")
    assert attr(pool, "kernel_shape") == [3, 3] and attr(pool, "strides") == [2, 2] and attr(pool, "pads") == [1] * 4
    downsamples = [c for c in convs if attr(c, "kernel_shape") == [1, 1]]
    assert [(w[c.input[1]].shape[:2], attr(c, "strides")) for c in downsamples] == [
        ((128, 64), [2, 2]), ((256, 128), [2, 2]), ((512, 256), [2, 2])]
    assert sum(attr(c, "kernel_shape") == [3, 3] for c in convs) == 16  # 4 stages x 2 BasicBlocks x 2
    assert len(ops(model, "Add")) == 8 and len(ops(model, "Relu")) == 17  # one residual add per block
    assert w[ops(model, "Gemm")[0].input[1]].shape == (1000, 512)


def test_resnet18_stage_shapes_follow_a_224_image_down_to_7x7():
    model = shape_inference.infer_shapes(resnet18(), strict_mode=True)
    shapes = {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim)
              for v in [*model.graph.value_info, *model.graph.output]}
    adds = [shapes[n.output[0]] for n in ops(model, "Add")]
    assert adds == [(1, c, s, s) for c, s in ((64, 56), (128, 28), (256, 14), (512, 7)) for _ in range(2)]
    assert shapes["output"] == (1, 1000)
    assert BUILDERS["resnet18"].inputs("ci") == BUILDERS["resnet18"].inputs("full")
    assert builtin_models("ci")["resnet18"].inputs[0].shape == (1, 3, 224, 224)


def test_resnet18_has_torchvisions_parameter_count():
    """torchvision counts each BatchNorm's weight and bias (2 per channel); folded, they are one bias per channel."""
    model = resnet18()
    folded_channels = sum(weights(model)[c.input[1]].shape[0] for c in ops(model, "Conv"))
    assert folded_channels == 4800
    assert sum(t.size for t in weights(model).values()) + folded_channels == TORCHVISION_PARAMETERS


def test_resnet18_outputs_are_finite_sane_and_follow_the_input():
    model = resnet18()
    first, second = outputs(model, 0), outputs(model, 1)
    for logits in (first, second):
        assert np.isfinite(logits).all()
        assert 0.5 < logits.std() < 50 and np.abs(logits).max() < 200
    assert first.argmax() != second.argmax(), "every image gets the same class: the common mode was not removed"
    assert resnet18().SerializeToString() == BUILDERS["resnet18"].build("ci", 0).SerializeToString()
    assert outputs(resnet18(1), 0).argmax() != first.argmax()  # another weight seed, another network


def test_resnet18_int8_wraps_every_conv_and_the_fc_in_qdq(tmp_path):
    spec = builtin_models("ci")["resnet18-int8"]
    assert spec.preparation == ("quantize-int8",)
    model = onnx.load(str(prepare(spec, USER_CACHE)))
    producer = {out: node for node in model.graph.node for out in node.output}
    w = weights(model)
    convs = ops(model, "Conv")
    assert len(convs) == 20
    for node in [*convs, *ops(model, "Gemm")]:
        data, weight = (producer[name] for name in node.input[:2])
        assert data.op_type == weight.op_type == "DequantizeLinear", node.name
        assert w[weight.input[0]].dtype == np.int8
        assert node.output[0] in {i for n in ops(model, "QuantizeLinear") for i in n.input}, node.name
    for conv in convs:  # per-channel weight scales, as the project's other int8 models
        weight = producer[conv.input[1]]
        assert w[weight.input[1]].shape == (w[weight.input[0]].shape[0],)


def _chosen(models: str | None) -> list[str]:
    given = (lambda option: (models, Path.cwd()) if option.name == "models" else None) if models else (
        lambda option: None)
    return [m.name for m in Settings.resolve(given, {}, Path.cwd()).models]


@pytest.mark.parametrize("size", ["ci", "full"])
def test_resnet18_is_not_in_the_default_run(size):
    models = builtin_models(size)
    assert not models["resnet18"].selected and not models["resnet18-int8"].selected
    assert "slow" in models["resnet18"].marks
    assert not {"resnet18", "resnet18-int8"} & set(_chosen(None))


def test_resnet18_runs_when_named_or_by_the_studies_selection():
    assert _chosen("resnet18") == ["resnet18"]
    assert _chosen("resnet18,resnet18-int8") == ["resnet18", "resnet18-int8"]
    assert _chosen(STUDIES) == ["resnet18", "resnet18-int8"]
    assert not {"resnet18", "resnet18-int8"} & set(_chosen("real-layers"))


def test_models_command_lists_the_studies_selection():
    out = models_listing("studies")
    assert "resnet18  [ci]  marks: slow" in out and "resnet18-int8  [ci]  marks: slow" in out
    assert out.count("source: built in code: resnet18 (ci, seed 0)") == 2
    assert out.count("inputs: input 1x3x224x224 float32 normal") == 2
    assert "Conv 20" in out and "DequantizeLinear 75, QuantizeLinear 33, Conv 20" in out
