"""The seed-study graph builders: valid fixed-shape ONNX, deterministic, sane outputs, faithful structure.

onnx.checker and onnxruntime only; the IREE path for these models is exercised elsewhere.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper, shape_inference

from pytest_rvv.model.builders import BUILDERS, REAL_FAMILY, SIZES
from pytest_rvv.model.model import InputSpec

# the architectures at CI size (the real-shaped layers, 60-250 MB each, are checked in test_decoder_builder.py;
# ResNet18, one size, in test_resnet18.py)
NAMES = [n for n, b in BUILDERS.items() if not b.selection]
CNNS = [n for n in NAMES if BUILDERS[n].family.endswith("CNN")]
DECODERS = [n for n in NAMES if BUILDERS[n].family == "decoder LLM"]  # more in test_decoder_builder.py
_DTYPES = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.INT64: "int64"}


@functools.cache
def built(name: str, size: str, seed: int = 0) -> onnx.ModelProto:
    return BUILDERS[name].build(size, seed)


@functools.cache
def ort_outputs(name: str) -> list[np.ndarray]:
    """onnxruntime's outputs for the ci model on the seeded inputs (as Model.generate_inputs makes them)."""
    specs = BUILDERS[name].inputs("ci")
    rng = np.random.default_rng(0)
    feeds = {spec.name: spec.generate(rng) for spec in specs}
    session = ort.InferenceSession(built(name, "ci").SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@functools.cache
def inferred_shapes(name: str, size: str) -> dict[str, tuple[int, ...]]:
    model = shape_inference.infer_shapes(built(name, size), strict_mode=True)
    values = [*model.graph.input, *model.graph.value_info, *model.graph.output]
    shapes = {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim) for v in values}
    shapes.update({i.name: tuple(i.dims) for i in model.graph.initializer})
    return shapes


def nodes(model: onnx.ModelProto, op: str) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == op]


def attr(node: onnx.NodeProto, name: str, default: object = None) -> object:
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def initializer(model: onnx.ModelProto, name: str) -> onnx.TensorProto:
    return next(i for i in model.graph.initializer if i.name == name)


def dims(value: onnx.ValueInfoProto) -> tuple[int, ...]:
    return tuple(d.dim_value if d.HasField("dim_value") else -1 for d in value.type.tensor_type.shape.dim)


# (1) valid models whose inputs are exactly the builder's InputSpecs

@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_model_is_valid_with_fixed_shapes_matching_its_inputs(name, size):
    model = built(name, size)
    onnx.checker.check_model(model)
    assert model.ir_version == 8
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
    assert model.graph.name == name.removesuffix("-int8w").replace(".", "_").replace("-", "_")
    specs = BUILDERS[name].inputs(size)
    assert all(isinstance(s, InputSpec) for s in specs)
    graph_inputs = [(i.name, dims(i), _DTYPES[i.type.tensor_type.elem_type]) for i in model.graph.input]
    assert graph_inputs == [(s.name, s.shape, s.dtype) for s in specs]
    assert all(o.type.tensor_type.elem_type == onnx.TensorProto.FLOAT for o in model.graph.output)
    outputs = [(o.name, dims(o)) for o in model.graph.output]
    if name == "tinybert":
        assert outputs == [("last_hidden_state", (1, specs[0].shape[1], 312))]
    elif name in DECODERS:  # logits of each new token, and the KV cache (layers, batch, KV heads, slots, head dim)
        tokens, slots = specs[0].shape[1], (specs[0].shape[1] if len(specs) == 1 else specs[2].shape[3])
        assert outputs == [("logits", (1, tokens, 256)), ("present_keys", (2, 1, 2, slots, 16)),
                           ("present_values", (2, 1, 2, slots, 16))]
    else:
        assert outputs == [("output", (1, 1000))]
    assert all(d > 0 for shape in inferred_shapes(name, size).values() for d in shape), "a dynamic dimension"


def test_sizes():
    for name in CNNS:
        assert BUILDERS[name].inputs("full")[0].shape == (1, 3, 224, 224)
        side = BUILDERS[name].inputs("ci")[0].shape[2]
        assert 32 < side < 224
        assert BUILDERS[name].inputs("ci")[0] == InputSpec("input", (1, 3, side, side), "float32", "normal", 0, 1)
    assert [s.shape for s in BUILDERS["tinybert"].inputs("full")] == [(1, 128)] * 3
    assert [(s.name, s.shape, s.dtype, s.generator) for s in BUILDERS["tinybert"].inputs("ci")] == [
        ("input_ids", (1, 32), "int64", "integers"), ("attention_mask", (1, 32), "int64", "ones"),
        ("token_type_ids", (1, 32), "int64", "zeros")]
    with pytest.raises(ValueError, match="unknown size"):
        BUILDERS["alexnet"].build("huge", 0)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", CNNS)
def test_no_strided_window_collapses_a_padded_input_to_one(name, size):
    """IREE's fold-unit-extent-dims pass miscompiles a strided Conv/MaxPool with a 1-wide output from a
    padded (or ceil-mode) input larger than its kernel: the sizes are chosen to avoid that."""
    model, shapes = built(name, size), inferred_shapes(name, size)
    for node in [*nodes(model, "Conv"), *nodes(model, "MaxPool"), *nodes(model, "AveragePool")]:
        kernel, strides = attr(node, "kernel_shape"), attr(node, "strides")
        pads, ceil = attr(node, "pads", [0] * 4), attr(node, "ceil_mode", 0)
        for d in range(2):
            source, out = shapes[node.input[0]][2 + d], shapes[node.output[0]][2 + d]
            if strides[d] > 1 and out == 1:
                assert not ceil and source + pads[d] + pads[d + 2] == kernel[d], f"{node.name}: {source} -> 1"


# (2) determinism

@pytest.mark.parametrize("name", NAMES)
def test_build_is_deterministic_and_seeded(name):
    first = built(name, "ci").SerializeToString()
    assert BUILDERS[name].build("ci", 0).SerializeToString() == first
    assert BUILDERS[name].build("ci", 1).SerializeToString() != first


# (3) onnxruntime outputs are finite and informative

@pytest.mark.parametrize("name", NAMES)
def test_onnxruntime_outputs_are_finite_and_not_degenerate(name):
    out, *cache = ort_outputs(name)
    assert all(np.isfinite(o).all() for o in [out, *cache])
    assert out.std() > 0.1, "weights collapse the activations"
    assert np.abs(out).max() < 1000, "weights blow the activations up"
    if name == "tinybert":  # post-LN: every token vector is normalised
        np.testing.assert_allclose(out.std(axis=-1), 1.0, atol=1e-3)


# (4) the architectures

@pytest.mark.parametrize("name", ["alexnet", "nin"])
def test_large_kernel_cnns_start_with_an_11x11_stride_4_conv(name):
    model = built(name, "full")
    first = nodes(model, "Conv")[0]
    assert first.input[0] == "input"
    assert attr(first, "kernel_shape") == [11, 11]
    assert attr(first, "strides") == [4, 4]
    channels = initializer(model, first.input[1]).dims[0]
    assert channels == {"alexnet": 64, "nin": 96}[name]
    assert not nodes(model, "LRN")


def test_alexnet_layers():
    model = built("alexnet", "full")
    convs = nodes(model, "Conv")
    assert [tuple(initializer(model, c.input[1]).dims[:1]) + tuple(attr(c, "kernel_shape")) for c in convs] == [
        (64, 11, 11), (192, 5, 5), (384, 3, 3), (256, 3, 3), (256, 3, 3)]
    assert len(nodes(model, "MaxPool")) == 3
    assert [tuple(initializer(model, g.input[1]).dims) for g in nodes(model, "Gemm")] == [
        (4096, 256 * 6 * 6), (4096, 4096), (1000, 4096)]
    ci = built("alexnet", "ci")
    assert [initializer(ci, g.input[1]).dims[0] for g in nodes(ci, "Gemm")] == [4096, 4096, 1000]


def test_nin_is_mlpconv_blocks_with_global_average_pooling():
    model = built("nin", "full")
    convs = nodes(model, "Conv")
    assert len(convs) == 12
    assert [attr(c, "kernel_shape")[0] for c in convs] == [11, 1, 1, 5, 1, 1, 3, 1, 1, 3, 1, 1]
    assert initializer(model, convs[-1].input[1]).dims[0] == 1000
    assert len(nodes(model, "Relu")) == 12
    assert len(nodes(model, "MaxPool")) == 3
    assert len(nodes(model, "GlobalAveragePool")) == 1
    assert not nodes(model, "Gemm")


def test_mobilenetv2_has_depthwise_convs_and_relu6():
    model = built("mobilenetv2", "ci")
    shapes = inferred_shapes("mobilenetv2", "ci")
    depthwise = [c for c in nodes(model, "Conv") if attr(c, "group", 1) == shapes[c.input[0]][1] > 1]
    assert len(depthwise) == 17
    assert all(attr(c, "kernel_shape") == [3, 3] and initializer(model, c.input[1]).dims[1] == 1 for c in depthwise)
    assert sum(attr(c, "strides") == [2, 2] for c in depthwise) == 4
    assert len(nodes(model, "Conv")) == 52
    assert len(nodes(model, "BatchNormalization")) == 52
    assert len(nodes(model, "Add")) == 10  # residual connections
    for clip in nodes(model, "Clip"):
        low, high = (float(numpy_helper.to_array(initializer(model, n))) for n in clip.input[1:])
        assert (low, high) == (0.0, 6.0)
    assert len(nodes(model, "Clip")) == 35
    assert initializer(model, nodes(model, "Gemm")[0].input[1]).dims == [1000, 1280]


def test_squeezenet_has_eight_fire_modules():
    model = built("squeezenet1.1", "ci")
    concats = nodes(model, "Concat")
    assert len(concats) == 8
    shapes = inferred_shapes("squeezenet1.1", "ci")
    assert [shapes[c.output[0]][1] for c in concats] == [128, 128, 256, 256, 384, 384, 512, 512]
    first = nodes(model, "Conv")[0]
    assert (initializer(model, first.input[1]).dims[0], attr(first, "kernel_shape"), attr(first, "strides")) == (
        64, [3, 3], [2, 2])
    assert len(nodes(model, "Conv")) == 26
    assert len(nodes(model, "MaxPool")) == 3
    assert initializer(model, nodes(model, "Conv")[-1].input[1]).dims[:2] == [1000, 512]


def test_googlenet_has_nine_inception_blocks():
    model = built("googlenet", "ci")
    concats = nodes(model, "Concat")
    assert len(concats) == 9
    assert all(len(c.input) == 4 for c in concats)
    shapes = inferred_shapes("googlenet", "ci")
    assert [shapes[c.output[0]][1] for c in concats] == [256, 480, 512, 512, 512, 528, 832, 832, 1024]
    stem = nodes(model, "Conv")[0]
    assert (attr(stem, "kernel_shape"), attr(stem, "strides")) == ([7, 7], [2, 2])
    assert len(nodes(model, "Conv")) == 3 + 9 * 6
    assert len(nodes(model, "MaxPool")) == 4 + 9
    assert initializer(model, nodes(model, "Gemm")[0].input[1]).dims == [1000, 1024]


def test_tinybert_is_a_4_layer_312_wide_encoder():
    model = built("tinybert", "ci")
    assert len(nodes(model, "LayerNormalization")) == 1 + 2 * 4
    assert len(nodes(model, "Softmax")) == 4
    assert len(nodes(model, "Erf")) == 4
    assert len(nodes(model, "MatMul")) == 4 * (6 + 2)  # Q, K, V, out, FFN in/out + 2 attention products
    tables = sorted(tuple(initializer(model, g.input[0]).dims) for g in nodes(model, "Gather"))
    assert tables == [(2, 312), (512, 312), (30522, 312)]
    shapes = inferred_shapes("tinybert", "ci")
    assert {shapes[r.output[0]] for r in nodes(model, "Reshape")} == {(1, 32, 12, 26), (1, 32, 312)}
    ffn = [tuple(initializer(model, m.input[1]).dims) for m in nodes(model, "MatMul")
           if m.input[1] in {i.name for i in model.graph.initializer}]
    assert ffn.count((312, 1200)) == 4 and ffn.count((1200, 312)) == 4 and ffn.count((312, 312)) == 16


def test_tinybert_attention_mask_is_applied():
    """Masking the second half of the tokens changes the first half's outputs."""
    specs = BUILDERS["tinybert"].inputs("ci")
    rng = np.random.default_rng(0)
    feeds = {s.name: s.generate(rng) for s in specs}
    session = ort.InferenceSession(built("tinybert", "ci").SerializeToString(), providers=["CPUExecutionProvider"])
    full = session.run(None, feeds)[0]
    feeds["attention_mask"][:, 16:] = 0
    masked = session.run(None, feeds)[0]
    assert not np.allclose(full[:, :16], masked[:, :16], atol=1e-3)
    np.testing.assert_allclose(full, ort_outputs("tinybert")[0])


def test_registry_metadata():
    families = {"depthwise CNN", "plain CNN", "large-kernel CNN", "inception CNN", "transformer encoder",
                "decoder LLM", REAL_FAMILY, "residual CNN"}
    assert NAMES == ["mobilenetv2", "squeezenet1.1", "alexnet", "nin", "googlenet", "tinybert", "llama-prefill",
                     "llama-prefill-int8w", "llama-decode", "llama-decode-int8w"]
    assert [n for n in BUILDERS if n not in NAMES] == ["resnet18"] + [
        f"{llm}-layer-{step}{weights}" for llm in ("llama-3.2-1b", "qwen2.5-0.5b") for step in ("prefill", "decode")
        for weights in ("", "-int8w")]
    for name, builder in BUILDERS.items():
        assert builder.name == name
        assert builder.family in families
        assert builder.description and "\n" not in builder.description
