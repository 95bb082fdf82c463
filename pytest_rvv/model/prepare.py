"""Preparation: named, ordered steps that turn a source .onnx into the file that is compiled.

Every step is recorded in the cache key and in reports. The prepared file is what both
onnxruntime (the reference) and IREE (the system under test) consume.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import onnx

from pytest_rvv.errors import ModelError
from pytest_rvv.model.model import Model
from pytest_rvv.store import Store, digest, file_sha256


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
    )
}


def _tool_versions(steps: tuple[str, ...]) -> list[str]:
    versions = [f"onnx={onnx.__version__}"]
    if "ort-prefold" in steps:
        import onnxruntime

        versions.append(f"onnxruntime={onnxruntime.__version__}")
    return versions


def prepare(spec: Model, cache_root: Path) -> Path:
    """Fetch the model and apply its preparation steps; return the prepared .onnx (cached)."""
    unknown = [s for s in spec.preparation if s not in STEPS]
    if unknown:
        raise ModelError(f"model {spec.name!r}: unknown preparation step(s) {unknown}; known: {list(STEPS)}")
    source = spec.source.fetch(cache_root)
    load_onnx(source)  # fail early, with the file's name, on a missing or corrupt file
    shapes = [f"{i.name}:{i.shape}:{i.dtype}" for i in spec.inputs]
    key = digest(["prepare-v1", file_sha256(source), *spec.preparation, *shapes, *_tool_versions(spec.preparation)])

    def build(tmp: Path) -> dict[str, object]:
        model = load_onnx(source)
        for step in spec.preparation:
            model = STEPS[step].apply(model, spec)
        onnx.save(model, str(tmp / "model.onnx"))
        return {"model": spec.name, "source": spec.source.describe(), "steps": list(spec.preparation)}

    return Store(cache_root).get_or_build("prepared", key, build).file("model.onnx")
