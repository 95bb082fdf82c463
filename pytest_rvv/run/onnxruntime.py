"""The oracle's outputs: onnxruntime (CPU) on the same prepared model and inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pytest_rvv.base.errors import ModelError
from pytest_rvv.model.quantize import QDQ_OPS, emulate_bfloat16, has_bfloat16

# "bfloat16": the graph's float32 emulation (model/quantize.py: emulate_bfloat16), run literally (onnxruntime's
# optimizations could fold its rounding Casts away)
OPTIMIZATION_LEVELS = {"all": "ORT_ENABLE_ALL", "basic": "ORT_ENABLE_BASIC", "bfloat16": "ORT_DISABLE_ALL"}


def reference_level(model_path: Path) -> str:
    """onnxruntime's graph optimization level for a reference: "all" (its default), "basic" for a graph with
    QuantizeLinear/DequantizeLinear nodes, "bfloat16" for a bfloat16 graph (onnxruntime has no bfloat16 MatMul:
    it runs the graph's float32 emulation, every bfloat16 value rounded).

    onnxruntime's extended level fuses QDQ groups into its own integer kernels, which are neither the model's
    arithmetic nor the same on every machine: on an AVX2 CPU without VNNI its u8s8 MatMul saturates (measured:
    a 2-layer int8 MLP 4 quantization steps off its QDQ arithmetic, which IREE and the basic level agree on
    exactly), and weight-only ``DequantizeLinear -> MatMul`` becomes a MatMul that quantizes the activations too
    (measured: 2.0e-3 off the exact result of a 64x32 layer, where IREE is within 9e-8). The basic level runs the
    QDQ nodes as written, in float, on every machine alike.
    """
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    if has_bfloat16(model):
        return "bfloat16"
    graph = model.graph
    return "basic" if any(node.op_type in QDQ_OPS for node in graph.node) else "all"


def onnxruntime_outputs(model_path: Path, input_names: list[str], inputs: list[np.ndarray],
                        optimizations: str = "all") -> list[np.ndarray]:
    """Run the prepared model with onnxruntime's CPU provider, single-threaded and deterministic, at the graph
    optimization level ``optimizations`` (one of OPTIMIZATION_LEVELS, as ``reference_level`` chooses)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPTIMIZATION_LEVELS[optimizations])
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    try:
        if optimizations == "bfloat16":
            import onnx

            source: str | bytes = emulate_bfloat16(onnx.load(str(model_path))).SerializeToString()
        else:
            source = str(model_path)
        session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        return list(session.run(None, dict(zip(input_names, inputs, strict=True))))
    except Exception as exc:  # onnxruntime raises its own exception types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{model_path}: onnxruntime cannot run the model: {first}") from exc
