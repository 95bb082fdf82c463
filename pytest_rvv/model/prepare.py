"""Preparation: named, ordered steps that turn a source .onnx into the file that is compiled.

Every step is recorded in the cache key and in reports. The prepared file is what both
onnxruntime (the reference) and IREE (the system under test) consume.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from pytest_rvv.base.errors import ModelError
from pytest_rvv.base.store import Store, content_sha, digest
from pytest_rvv.model.model import Model
from pytest_rvv.model.quantize import check_quantization, quantize_int8, to_bfloat16, to_float16


def load_onnx(path: Path) -> onnx.ModelProto:
    """Load and sanity-check an .onnx file, with a one-line error naming it."""
    if not path.is_file():
        raise ModelError(f"{path}: model file not found")
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # protobuf raises DecodeError, onnx raises its own
        raise ModelError(f"{path}: not a valid ONNX model ({type(exc).__name__}); re-export or re-download it") from exc
    if not model.graph.node:
        raise ModelError(f"{path}: ONNX graph has no nodes; re-export or re-download it")
    return model


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Real graph inputs (initializers listed as inputs by old exporters excluded)."""
    initializers = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def fix_dims(model: onnx.ModelProto, spec: Model) -> onnx.ModelProto:
    """Set every input's shape to the registered fixed shape; drop stale dynamic output dims."""
    by_name = {i.name: i for i in spec.inputs}
    inputs = graph_inputs(model)
    names = [i.name for i in inputs]
    if sorted(names) != sorted(by_name):
        raise ModelError(
            f"model {spec.name!r}: graph inputs {names} do not match the registered inputs {sorted(by_name)}"
        )
    for value in inputs:
        shape = by_name[value.name].shape
        dims = value.type.tensor_type.shape.dim
        if len(dims) != len(shape):
            raise ModelError(
                f"model {spec.name!r}: input {value.name!r} has rank {len(dims)}, registered shape {shape}"
            )
        for dim, size in zip(dims, shape, strict=True):
            dim.Clear()
            dim.dim_value = size
    for value in model.graph.output:
        for dim in value.type.tensor_type.shape.dim:
            if not dim.HasField("dim_value"):
                dim.Clear()
    del model.graph.value_info[:]
    return model


def _shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    """Static shapes of every value, from ONNX shape inference (unknown dims as -1)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {}
    for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        dims = value.type.tensor_type.shape.dim
        shapes[value.name] = [d.dim_value if d.HasField("dim_value") else -1 for d in dims]
    for init in model.graph.initializer:
        shapes[init.name] = list(init.dims)
    return shapes


def conv_unit_output(model: onnx.ModelProto, spec: Model) -> onnx.ModelProto:
    """Work around IREE's fold-unit-extent-dims bug on strided convs with a spatial output of 1.

    When such a conv's padded input is longer than its (dilated) kernel, IREE fails with
    "inferred input/output operand #1 has shape's dimension #2 to be 4, but found 3". Only the
    first window is read, so trimming the end padding to the kernel's extent is exact.
    """
    shapes = _shapes(model)
    for node in model.graph.node:
        if node.op_type != "Conv":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            continue
        x, w = shapes.get(node.input[0]), shapes.get(node.input[1])
        if not x or not w or -1 in x[2:] or -1 in w[2:]:
            continue
        spatial = len(x) - 2
        kernel = list(attrs.get("kernel_shape", w[2:]))
        strides = list(attrs.get("strides", [1] * spatial))
        dilations = list(attrs.get("dilations", [1] * spatial))
        pads = list(attrs.get("pads", [0] * 2 * spatial))
        changed = False
        for axis in range(spatial):
            extent = (kernel[axis] - 1) * dilations[axis] + 1
            begin, end = pads[axis], pads[axis + spatial]
            padded = x[2 + axis] + begin + end
            out = (padded - extent) // strides[axis] + 1
            if out == 1 and strides[axis] > 1 and padded > extent and extent - x[2 + axis] - begin >= 0:
                pads[axis + spatial] = extent - x[2 + axis] - begin
                changed = True
        if changed:
            for attribute in node.attribute:
                if attribute.name == "pads":
                    attribute.CopyFrom(onnx.helper.make_attribute("pads", pads))
    return model


def _constant_values(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    values = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            values[node.output[0]] = onnx.numpy_helper.to_array(node.attribute[0].t)
    return values


def reflect_pad_gather(model: onnx.ModelProto, spec: Model) -> onnx.ModelProto:
    """Work around IREE's llvm-cpu failure on wide reflect ``Pad``: rewrite it as exact ``Gather``s.

    Reflect padding of length L by (b, e) along an axis gathers indices b..1, 0..L-1, L-2..L-1-e.
    """
    shapes, constants = _shapes(model), _constant_values(model)
    nodes = []
    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        pads = constants.get(node.input[1]) if node.op_type == "Pad" and len(node.input) > 1 else None
        shape = shapes.get(node.input[0])
        if (node.op_type != "Pad" or attrs.get("mode") not in (b"reflect", "reflect") or pads is None
                or not shape or -1 in shape or (len(node.input) > 3 and node.input[3])):
            nodes.append(node)
            continue
        rank, current = len(shape), node.input[0]
        axes = [a for a in range(rank) if pads[a] or pads[a + rank]]
        for n, axis in enumerate(axes):
            length, begin, end = shape[axis], int(pads[axis]), int(pads[axis + rank])
            index = np.concatenate([np.arange(begin, 0, -1), np.arange(length),
                                    np.arange(length - 2, length - 2 - end, -1)]).astype(np.int64)
            name = f"{node.output[0]}__reflect_axis{axis}"
            model.graph.initializer.append(onnx.numpy_helper.from_array(index, f"{name}_indices"))
            output = node.output[0] if n == len(axes) - 1 else name
            nodes.append(onnx.helper.make_node("Gather", [current, f"{name}_indices"], [output], axis=axis,
                                               name=f"{node.name or name}_gather{axis}"))
            current = output
        if not axes:
            nodes.append(onnx.helper.make_node("Identity", [node.input[0]], [node.output[0]]))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    used = {name for node in model.graph.node for name in node.input}
    kept = [i for i in model.graph.initializer if i.name in used or i.name in {o.name for o in model.graph.output}]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    return model


def ort_prefold(model: onnx.ModelProto, spec: Model) -> onnx.ModelProto:
    """Fold shape computations with onnxruntime's basic graph optimizations."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.onnx", Path(tmp) / "out.onnx"
        onnx.save(model, str(src))
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(dst)
        ort.InferenceSession(str(src), options, providers=["CPUExecutionProvider"])
        return onnx.load(str(dst))


@dataclass(frozen=True)
class Step:
    name: str
    apply: Callable[[onnx.ModelProto, Model], onnx.ModelProto]
    doc: str


STEPS: dict[str, Step] = {
    s.name: s
    for s in (
        Step("fix-dims", fix_dims, "set input dims to the registered shapes"),
        Step("ort-prefold", ort_prefold, "onnxruntime basic-optimization pre-fold of shape subgraphs"),
        Step("reflect-pad-gather", reflect_pad_gather,
             "rewrite reflect Pad as Gather (IREE llvm-cpu fails on wide reflect pads)"),
        Step("conv-unit-output", conv_unit_output,
             "trim end padding of strided convs with a spatial output of 1 (IREE fold-unit-extent-dims bug)"),
        Step("quantize-int8", quantize_int8,
             "static int8 QDQ quantization by onnxruntime (per-channel weights, 8 seeded calibration inputs)"),
        Step("float16", to_float16, "float16 weights and activations (onnxconverter-common), float32 I/O"),
        Step("bfloat16", to_bfloat16, "bfloat16 weights and activations (round-to-nearest-even), float32 I/O"),
    )
}


def _tool_versions(steps: tuple[str, ...]) -> list[str]:
    versions = [f"onnx={onnx.__version__}"]
    if "ort-prefold" in steps or "quantize-int8" in steps:
        import onnxruntime

        versions.append(f"onnxruntime={onnxruntime.__version__}")
    if "bfloat16" in steps:
        import ml_dtypes

        versions.append(f"ml_dtypes={ml_dtypes.__version__}")
    if "float16" in steps:
        from importlib.metadata import PackageNotFoundError, version

        try:
            versions.append(f"onnxconverter-common={version('onnxconverter-common')}")
        except PackageNotFoundError:
            versions.append("onnxconverter-common=missing")
    return versions


def prepare(spec: Model, cache_root: Path) -> Path:
    """Fetch the model and apply its preparation steps; return the prepared .onnx (cached)."""
    unknown = [s for s in spec.preparation if s not in STEPS]
    if unknown:
        raise ModelError(f"model {spec.name!r}: unknown preparation step(s) {unknown}; known: {list(STEPS)}")
    source = spec.source.fetch(cache_root)
    shapes = [f"{i.name}:{i.shape}:{i.dtype}" for i in spec.inputs]
    key = digest(["prepare-v1", content_sha(source), *spec.preparation, *shapes, *_tool_versions(spec.preparation)])
    store = Store(cache_root)
    found = store.lookup("prepared", key)
    if found is not None:  # this very content passed the checks below when it was prepared
        return found.file("model.onnx")
    check_quantization(load_onnx(source), spec.name)  # fail early, with the file's name: missing, corrupt, bad QDQ

    def build(tmp: Path) -> dict[str, object]:
        model = load_onnx(source)
        for step in spec.preparation:
            model = STEPS[step].apply(model, spec)
        onnx.save(model, str(tmp / "model.onnx"))
        return {"model": spec.name, "source": spec.source.describe(), "steps": list(spec.preparation)}

    return store.get_or_build("prepared", key, build).file("model.onnx")
