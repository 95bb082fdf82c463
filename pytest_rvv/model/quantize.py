"""Low-precision preparation steps: int8 QDQ (onnxruntime's own static quantizer), float16 (onnxconverter-common)
and bfloat16 (ml_dtypes' round-to-nearest-even).

Both are steps of ``model/prepare.py``: the prepared file is what onnxruntime (the reference) and IREE both
consume, so agreement is against onnxruntime's own quantized or half-precision result, not the float model.
An int8 model's agreement is counted in quantization steps: each graph output that a ``DequantizeLinear``
produces lies on a grid of its scale, and ``Tolerance.steps`` allows that many steps of it.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from pytest_rvv.base.errors import ModelError
from pytest_rvv.model.model import Model

CALIBRATION_SAMPLES = 8
CALIBRATION_SEED_OFFSET = 1  # calibration inputs differ from the test inputs (seed + 1)
QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")


def quantize_int8(model: onnx.ModelProto, spec: Model) -> onnx.ModelProto:
    """Static int8 QDQ quantization (per-channel weights, int8 activations), calibrated on seeded inputs."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(spec.seed + CALIBRATION_SEED_OFFSET)
    samples = [{i.name: i.generate(rng) for i in spec.inputs} for _ in range(CALIBRATION_SAMPLES)]

    class Samples(CalibrationDataReader):
        def __init__(self) -> None:
            self.remaining = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.remaining, None)

    with tempfile.TemporaryDirectory(prefix="pytest-rvv-quantize-") as tmp:
        src, dst = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, str(src))
        quantize_static(str(src), str(dst), Samples(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
        quantized = onnx.load(str(dst))
    check_quantization(quantized, spec.name)
    return quantized


def to_float16(model: onnx.ModelProto, spec: Model) -> onnx.ModelProto:
    """Weights and activations in float16 (onnxconverter-common), float32 graph inputs and outputs kept."""
    try:
        from onnxconverter_common import float16
    except ImportError as exc:
        raise ModelError(f"model {spec.name!r}: the float16 step needs onnxconverter-common "
                         "(pip install onnxconverter-common)") from exc
    with warnings.catch_warnings():  # it warns once per weight it clamps to float16's range (by design): not news
        warnings.filterwarnings("ignore", message="the float32 number .* will be truncated to", category=UserWarning)
        return float16.convert_float_to_float16(model, keep_io_types=True)


def to_bfloat16(model: onnx.ModelProto, spec: Model) -> onnx.ModelProto:
    """Weights and activations in bfloat16, float32 graph inputs and outputs kept (a Cast at each end).

    Every operator must take bfloat16 at the model's opset (MatMul, Add, Softmax... do; Conv does not before
    opset 22): otherwise one line names the operator.
    """
    import ml_dtypes

    converted = onnx.ModelProto()
    converted.CopyFrom(model)
    graph = converted.graph
    _retype_constants(graph, onnx.TensorProto.FLOAT, ml_dtypes.bfloat16)
    _retype_casts(graph, onnx.TensorProto.FLOAT, onnx.TensorProto.BFLOAT16)
    floats = lambda values: [v.name for v in values if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT]  # noqa: E731
    renamed = {name: f"{name}_bf16" for name in [*floats(graph.input), *floats(graph.output)]}
    for node in graph.node:
        node.input[:] = [renamed.get(n, n) for n in node.input]
        node.output[:] = [renamed.get(n, n) for n in node.output]
    entry = [onnx.helper.make_node("Cast", [n], [renamed[n]], to=onnx.TensorProto.BFLOAT16, name=f"{n}_to_bf16")
             for n in floats(graph.input)]
    exit_ = [onnx.helper.make_node("Cast", [renamed[n]], [n], to=onnx.TensorProto.FLOAT, name=f"{n}_to_f32")
             for n in floats(graph.output)]
    nodes = [*entry, *graph.node, *exit_]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    try:
        onnx.shape_inference.infer_shapes(converted, check_type=True, strict_mode=True)
    except Exception as exc:  # onnx raises InferenceError / ValidationError
        first = str(exc).strip().splitlines()[0]
        raise ModelError(f"model {spec.name!r}: an operator does not take bfloat16 at opset "
                         f"{spec.opset}: {first}; leave out the bfloat16 step") from exc
    return converted


def has_bfloat16(model: onnx.ModelProto) -> bool:
    """Whether any initializer or Cast of the graph is bfloat16 (the bfloat16 step's output)."""
    return any(t.data_type == onnx.TensorProto.BFLOAT16 for t in model.graph.initializer) or any(
        a.name == "to" and a.i == onnx.TensorProto.BFLOAT16 for n in model.graph.node if n.op_type == "Cast"
        for a in n.attribute)


def emulate_bfloat16(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same graph in float32 with every bfloat16 value rounded to bfloat16: the bfloat16 model's arithmetic,
    in a form onnxruntime runs (its CPU provider has Cast to and from bfloat16, but no bfloat16 MatMul).

    Each operator computes in float32 from bfloat16 values and rounds its result once, as IREE's bfloat16 code
    does (it widens to f32, computes, and truncates with round-to-nearest-even).
    """
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    bf16 = {v.name for v in [*inferred.graph.value_info, *inferred.graph.output]
            if v.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16}
    emulated = onnx.ModelProto()
    emulated.CopyFrom(model)
    graph = emulated.graph
    _retype_constants(graph, onnx.TensorProto.BFLOAT16, np.float32)
    _retype_casts(graph, onnx.TensorProto.BFLOAT16, onnx.TensorProto.FLOAT)
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        rounded = [n for n in node.output if n in bf16]
        node.output[:] = [f"{n}_f32" if n in bf16 else n for n in node.output]
        nodes.append(node)
        for name in rounded:
            nodes.append(onnx.helper.make_node("Cast", [f"{name}_f32"], [f"{name}_rounded"],
                                               to=onnx.TensorProto.BFLOAT16))
            nodes.append(onnx.helper.make_node("Cast", [f"{name}_rounded"], [name], to=onnx.TensorProto.FLOAT))
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    return emulated


def _retype_constants(graph: onnx.GraphProto, source: int, dtype: type) -> None:
    """Convert every ``source``-typed initializer and tensor attribute (Constant, ConstantOfShape) to ``dtype``."""
    tensors = [*graph.initializer, *(a.t for n in graph.node for a in n.attribute
                                     if a.type == onnx.AttributeProto.TENSOR)]
    for tensor in tensors:
        if tensor.data_type == source:
            tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor).astype(dtype), tensor.name))


def _retype_casts(graph: onnx.GraphProto, source: int, target: int) -> None:
    """Make every Cast to ``source`` a Cast to ``target``."""
    for node in graph.node:
        for attribute in node.attribute:
            if node.op_type == "Cast" and attribute.name == "to" and attribute.i == source:
                attribute.i = target


def _initializers(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return values


def check_quantization(model: onnx.ModelProto, name: str) -> None:
    """Every Quantize/DequantizeLinear has a constant, positive, finite scale and a zero point in its type's
    range; otherwise one line naming the node."""
    constants = _initializers(model)
    for node in model.graph.node:
        if node.op_type not in QDQ_OPS:
            continue
        where = f"model {name!r}: {node.op_type} {node.name or node.output[0]!r}"
        if len(node.input) < 2 or node.input[1] not in constants:
            raise ModelError(f"{where} has no constant scale; re-quantize the model (quantization parameters "
                             "are missing)")
        scale = constants[node.input[1]]
        if not (np.all(np.isfinite(scale)) and np.all(scale > 0)):
            raise ModelError(f"{where} has scale {scale.ravel()[:4].tolist()}: scales must be positive and finite; "
                             "re-quantize the model")
        if len(node.input) > 2 and node.input[2]:
            if node.input[2] not in constants:
                raise ModelError(f"{where} has no constant zero point; re-quantize the model")
            zero = constants[node.input[2]]
            if zero.dtype.kind not in "iu" or (scale.size > 1 and zero.size not in (1, scale.size)):
                raise ModelError(f"{where}: zero point {zero.dtype} of {zero.size} does not match its "
                                 f"{scale.size} scale(s); re-quantize the model")


def output_steps(path: Path) -> tuple[float | None, ...]:
    """Each graph output's quantization step: the scale of the DequantizeLinear that produces it (None: float)."""
    model = onnx.load(str(path), load_external_data=False)
    if not any(n.op_type == "DequantizeLinear" for n in model.graph.node):
        return tuple(None for _ in model.graph.output)
    constants = _initializers(model)
    producer = {out: node for node in model.graph.node for out in node.output}
    steps: list[float | None] = []
    for output in model.graph.output:
        node = producer.get(output.name)
        scale = constants.get(node.input[1]) if node is not None and node.op_type == "DequantizeLinear" else None
        steps.append(float(np.max(scale)) if scale is not None else None)
    return tuple(steps)
