"""The ONNX backend node tests: fetched from the onnx 1.22.0 wheel (later wheels dropped them)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from pytest_rvv.base.store import Store
from pytest_rvv.base.wheels import fetch_tree_from_wheel

ONNX_WITH_NODE_TESTS = "onnx==1.22.0"
NODE_PREFIX = "onnx/backend/test/data/node/"
# A small cross-section for CI: elementwise, activations, reductions, matmul/conv/pool, shape ops, low precision.
DEFAULT_SUBSET = (
    "test_abs", "test_add", "test_add_bcast", "test_sub", "test_mul", "test_div", "test_pow", "test_sqrt",
    "test_exp", "test_log", "test_tanh", "test_sigmoid", "test_relu", "test_leakyrelu", "test_elu",
    "test_softmax_axis_1", "test_gelu_default_1", "test_clip", "test_erf",
    "test_reduce_mean_default_axes_keepdims_example",
    "test_reduce_sum_keepdims_example", "test_reduce_max_default_axes_keepdim_example", "test_matmul_2d",
    "test_matmul_3d", "test_gemm_default_no_bias", "test_conv_with_strides_padding",
    "test_basic_conv_with_padding",
    "test_maxpool_2d_default", "test_averagepool_2d_default", "test_globalaveragepool",
    "test_batchnorm_example", "test_layer_normalization_2d_axis0", "test_transpose_default",
    "test_reshape_extended_dims",
    "test_concat_2d_axis_0", "test_slice", "test_gather_0", "test_where_example", "test_cast_FLOAT_to_DOUBLE",
    "test_argmax_default_axis_example",
    # the types people deploy: int8 (QDQ and integer ops), float16 and bfloat16 casts
    "test_quantizelinear", "test_dequantizelinear", "test_dequantizelinear_axis", "test_qlinearmatmul_2D_int8_float32",
    "test_matmulinteger", "test_convinteger_with_padding", "test_cast_FLOAT_to_FLOAT16", "test_cast_FLOAT16_to_FLOAT",
    "test_cast_FLOAT_to_BFLOAT16",
)


@dataclass(frozen=True)
class NodeTest:
    """One node test: model.onnx plus test_data_set_0/{input,output}_N.pb."""

    name: str
    folder: Path

    @property
    def model(self) -> Path:
        return self.folder / "model.onnx"

    def _tensors(self, kind: str) -> list[Path]:
        data = self.folder / "test_data_set_0"
        return sorted(data.glob(f"{kind}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))

    def load(self, kind: str) -> list[np.ndarray]:
        """Inputs or outputs as arrays; raises ValueError for non-tensor data (sequences, optionals)."""
        arrays = []
        for path in self._tensors(kind):
            proto = onnx.TensorProto()
            proto.ParseFromString(path.read_bytes())
            if not proto.dims and not proto.raw_data and not any(
                    getattr(proto, f) for f in ("float_data", "int32_data", "int64_data", "double_data",
                                                "uint64_data", "string_data")):
                raise ValueError(f"{path.name} is not a tensor (sequence or optional input)")
            arrays.append(numpy_helper.to_array(proto))
        return arrays


def node_tests(store: Store) -> dict[str, NodeTest]:
    """Every node test of the onnx 1.22.0 wheel, downloaded into the cache at first use."""
    root = fetch_tree_from_wheel(store, ONNX_WITH_NODE_TESTS, NODE_PREFIX).file("tree")
    return {p.name: NodeTest(p.name, p) for p in sorted(root.iterdir()) if (p / "model.onnx").is_file()}


def select(names: list[str], pattern: str | None) -> list[str]:
    """``pattern``: None -> the default subset; "all"; or comma-separated globs / regexes."""
    if pattern is None:
        return [n for n in DEFAULT_SUBSET if n in names]
    if pattern == "all":
        return names
    chosen = []
    for part in (p.strip() for p in pattern.split(",") if p.strip()):
        regex = re.compile(fnmatch.translate(part) if any(c in part for c in "*?[") else f"^{re.escape(part)}$")
        chosen += [n for n in names if regex.match(n) or regex.match(n.removeprefix("test_"))]
    return list(dict.fromkeys(chosen))
