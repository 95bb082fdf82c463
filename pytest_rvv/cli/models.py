"""``pytest-rvv models``: every registered model with its source, size, inputs and operators."""

from __future__ import annotations

from collections import Counter

from pytest_rvv.base.errors import RvvError
from pytest_rvv.config.settings import Settings
from pytest_rvv.model.prepare import load_onnx, prepare

TOP_OPS = 6


def describe_models(settings: Settings, size: str) -> list[str]:
    """Lines describing each selected model (fetching/building it into the cache if needed)."""
    lines = []
    for model in settings.models:
        inputs = ", ".join(f"{i.name} {'x'.join(map(str, i.shape))} {i.dtype} {i.generator}" for i in model.inputs)
        lines += [
            f"{model.name}  [{size}]{'  marks: ' + ','.join(model.marks) if model.marks else ''}",
            f"    {model.description}",
            f"    source: {model.source.describe()}",
            f"    inputs: {inputs}",
            f"    preparation: {', '.join(model.preparation) or 'none'}; opset {model.opset}; "
            f"tolerance {model.tolerance.describe()}",
        ]
        try:
            graph = load_onnx(prepare(model, settings.cache_dir)).graph
        except RvvError as exc:
            lines.append(f"    ops: unavailable ({exc})")
            continue
        ops = Counter(node.op_type for node in graph.node)
        top = ", ".join(f"{op} {n}" for op, n in ops.most_common(TOP_OPS))
        more = f", +{len(ops) - TOP_OPS} more op types" if len(ops) > TOP_OPS else ""
        lines.append(f"    ops: {sum(ops.values())} nodes, {len(ops)} op types: {top}{more}")
    return lines
