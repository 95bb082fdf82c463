"""Reference outputs from onnxruntime (CPU) on the same prepared model and inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pytest_rvv.errors import ModelError

OPTIMIZATION_LEVELS = {"all": "ORT_ENABLE_ALL", "basic": "ORT_ENABLE_BASIC"}


def onnxruntime_outputs(model_path: Path, input_names: list[str], inputs: list[np.ndarray],
                        optimizations: str = "all") -> list[np.ndarray]:
    """Run the prepared model with onnxruntime's CPU provider, single-threaded and deterministic, at the graph
    optimization level ``optimizations`` ("all" or "basic", see Model.reference_optimizations)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPTIMIZATION_LEVELS[optimizations])
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        return list(session.run(None, dict(zip(input_names, inputs, strict=True))))
    except Exception as exc:  # onnxruntime raises its own exception types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{model_path}: onnxruntime cannot run the model: {first}") from exc
