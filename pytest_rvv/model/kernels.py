"""Matmul kernels as models: one MatMul (or MatMulInteger) at a named shape and element type.

Shapes are those IREE's e2e matmul tests and iree issue 24932 use (64^3, 256^3, 81x41x19, 540x516x332, 1024^2)
and the projections of two real LLMs (FACTS: Llama-3.2-1B hidden 2048, FFN 8192, 8 KV heads of 64; Qwen2.5-0.5B
hidden 896, FFN 4864, 2 KV heads of 64) at decode (M=1) and prefill (M=32, 128) rows. Both operands are function
arguments, as in iree issue 24932's matmul benchmarks: packing them is per-call work on the data-tiled paths.

Element types: ``f32``; ``f16`` and ``bf16`` (the float32 graph through the float16 / bfloat16 preparation step,
float32 I/O with a Cast at each end, the reference as for every model: model/quantize.py); ``i8`` (MatMulInteger,
int8 x int8 -> int32, exact); ``f16f16f32`` (iree PR 22231's benchmark function as it wrote it: ``linalg.matmul`` of
two f16 arguments accumulating into an f32 argument, all three dynamic; compiled from that MLIR, and checked
against onnxruntime on the same function as an ONNX graph: Cast, Cast, MatMul, Add).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.base.store import Store, digest
from pytest_rvv.model.model import InputSpec, Model, Tolerance


@dataclass(frozen=True)
class KernelShape:
    """C[M,N] = A[M,K] x B[K,N], with where the shape comes from."""

    m: int
    k: int
    n: int
    origin: str = ""
    weights: bool = False  # B is a constant weight of the model, not an argument

    @property
    def name(self) -> str:
        return f"{self.m}x{self.k}x{self.n}"

    @property
    def macs(self) -> int:
        return self.m * self.k * self.n


def shape(dims: object, where: str, origin: str = "") -> KernelShape:
    """A shape from ``[M, K, N]``; one line naming ``where`` for anything but three positive integers."""
    if (not isinstance(dims, list | tuple) or len(dims) != 3
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims)):
        raise ConfigError(f"{where}: a shape is [M, K, N], three positive integers, not {dims!r}")
    if any(d <= 0 for d in dims):
        raise ConfigError(f"{where}: shape {list(dims)} has a zero or negative dim; every one of M, K, N must be >= 1")
    return KernelShape(*dims, origin=origin)


E2E = "IREE e2e matmul / iree issue 24932"
LLAMA = "Llama-3.2-1B"
QWEN = "Qwen2.5-0.5B"
# (K, N) of each LLM's projections: q/o (hidden x hidden), k/v (hidden x KV heads * 64), up/gate, down
_LLM_PROJECTIONS = {LLAMA: ((2048, 2048), (2048, 512), (2048, 8192), (8192, 2048)),
                    QWEN: ((896, 896), (896, 128), (896, 4864), (4864, 896))}
DECODE, PREFILL_ROWS = 1, (32, 128)

SHAPES: dict[str, KernelShape] = {s.name: s for s in (
    *(KernelShape(*dims, origin=E2E) for dims in ((64, 64, 64), (256, 256, 256), (81, 41, 19), (540, 516, 332),
                                                  (1024, 1024, 1024))),
    KernelShape(2048, 2048, 2048, origin="iree PR 22231"),
    *(KernelShape(m, k, n, origin=f"{llm} {'decode' if m == DECODE else 'prefill'}", weights=True)
      for llm, projections in _LLM_PROJECTIONS.items() for m in (DECODE, *PREFILL_ROWS) for k, n in projections),
)}
# iree issue 24932's table: what CI runs of the kernel suite (with the LLM decode shapes)
ISSUE_24932 = ("64x64x64", "256x256x256", "81x41x19", "540x516x332")

DTYPES = ("f32", "f16", "bf16", "i8", "f16f16f32")
ARGUMENTS_ONLY = ("f16f16f32",)  # types that are a published function of arguments: no constant-weight form
_STEPS = {"f32": (), "f16": ("float16",), "bf16": ("bfloat16",), "i8": (), "f16f16f32": ()}
# Per type, relative to outputs of about 1 (B is scaled by 1/sqrt(K)): float16 carries 11 significant bits,
# bfloat16 8, and IREE and the reference accumulate in different orders; int8 x int8 -> int32 is exact; f16f16f32's
# operands are exact in f32, so it is held as an f32 matmul is.
TOLERANCES = {"f32": Tolerance(atol=1e-4, rtol=1e-3), "f16": Tolerance(atol=1e-2, rtol=2e-2),
              "bf16": Tolerance(atol=3e-2, rtol=3e-2), "i8": Tolerance(atol=0.0, rtol=0.0),
              "f16f16f32": Tolerance(atol=1e-4, rtol=1e-3)}


def kernel_name(dtype: str, s: KernelShape) -> str:
    return f"mm-{dtype}-{s.name}"


def kernel_model(dtype: str, s: KernelShape) -> Model:
    """The model of one kernel: ``mm-<dtype>-MxKxN``."""
    if dtype not in DTYPES:
        raise ConfigError(f"kernel dtype {dtype!r} is unknown; known: {', '.join(DTYPES)}")
    if dtype == "i8":
        inputs = (InputSpec("a", (s.m, s.k), "int8", "integers", -128, 128),
                  InputSpec("b", (s.k, s.n), "int8", "integers", -128, 128))
    elif dtype == "f16f16f32":
        if s.weights:
            raise ConfigError(f"kernel dtype {dtype} is iree PR 22231's function of three arguments; shape {s.name} "
                              "holds B as a constant weight")
        inputs = (InputSpec("a", (s.m, s.k), "float16", "uniform", -1.0, 1.0),
                  InputSpec("b", (s.k, s.n), "float16", "uniform", -_scale(s), _scale(s)),
                  InputSpec("acc", (s.m, s.n), "float32", "uniform", -1.0, 1.0))
    else:
        inputs = (InputSpec("a", (s.m, s.k), "float32", "uniform", -1.0, 1.0),
                  InputSpec("b", (s.k, s.n), "float32", "uniform", -_scale(s), _scale(s)))
    if s.weights:
        inputs = inputs[:1]
    return Model(name=kernel_name(dtype, s), source=KernelSource(dtype, s), inputs=inputs,
                 preparation=_STEPS[dtype], tolerance=TOLERANCES[dtype],
                 description=f"matmul {s.name} (MxKxN) {dtype}, {s.origin or 'user shape'}"
                             + (", B a constant weight" if s.weights else ", A, B and the accumulator arguments"
                                if dtype in ARGUMENTS_ONLY else ", A and B arguments"))


def _scale(s: KernelShape) -> float:
    """B's values lie in +-1/sqrt(K): outputs of about 1 at every K."""
    return 1.0 / math.sqrt(s.k)


# iree PR 22231's input (its comment of 2025-10-07, "Input MLIR"): every dim dynamic, the f32 accumulator an argument
PR_22231_FUNCTION = """\
func.func @matmul_dynamic(%lhs: tensor<?x?xf16>, %rhs: tensor<?x?xf16>, %acc: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %result = linalg.matmul ins(%lhs, %rhs: tensor<?x?xf16>, tensor<?x?xf16>) outs(%acc: tensor<?x?xf32>) \
-> tensor<?x?xf32>
  return %result: tensor<?x?xf32>
}
"""

WEIGHT_SEED = 1  # B's values when it is a weight (the arguments' come from the model's seed, as for every model)


@dataclass(frozen=True)
class KernelSource:
    """A matmul graph built in code (opset 17), cached by content."""

    dtype: str
    shape: KernelShape

    def describe(self) -> str:
        if self.dtype == "f16f16f32":
            return f"iree PR 22231's linalg.matmul f16 x f16 -> f32 (dynamic), run at {self.shape.name}"
        return f"built in code: MatMul{'Integer' if self.dtype == 'i8' else ''} {self.shape.name}"

    def mlir(self) -> str | None:
        """The MLIR the compiler takes instead of the imported ONNX graph, or None (import the graph): iree PR
        22231's benchmark function, as its "Benchmarking (Single Thread)" gives it."""
        return PR_22231_FUNCTION if self.dtype == "f16f16f32" else None

    def build(self) -> onnx.ModelProto:
        s = self.shape
        if self.dtype == "f16f16f32":  # the oracle's graph of PR_22231_FUNCTION (f16 -> f32 is exact)
            f16, f32 = TensorProto.FLOAT16, TensorProto.FLOAT
            nodes = [helper.make_node("Cast", ["a"], ["a32"], to=f32),
                     helper.make_node("Cast", ["b"], ["b32"], to=f32),
                     helper.make_node("MatMul", ["a32", "b32"], ["product"]),
                     helper.make_node("Add", ["product", "acc"], ["c"])]
            dynamic = [helper.make_tensor_value_info(name, kind, dims) for name, kind, dims in (
                ("a", f16, ["M", "K"]), ("b", f16, ["K", "N"]), ("acc", f32, ["M", "N"]))]
            graph = helper.make_graph(nodes, "matmul_dynamic", dynamic,
                                      [helper.make_tensor_value_info("c", f32, ["M", "N"])])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        if self.dtype == "i8":
            node = helper.make_node("MatMulInteger", ["a", "b"], ["c"])
            kind, out = TensorProto.INT8, TensorProto.INT32
        else:
            node = helper.make_node("MatMul", ["a", "b"], ["c"])
            kind = out = TensorProto.FLOAT
        arguments = [helper.make_tensor_value_info("a", kind, [s.m, s.k])]
        weights = []
        if s.weights:
            rng = np.random.default_rng(WEIGHT_SEED)
            values = (rng.integers(-128, 128, (s.k, s.n)).astype(np.int8) if self.dtype == "i8"
                      else rng.uniform(-_scale(s), _scale(s), (s.k, s.n)).astype(np.float32))
            weights.append(numpy_helper.from_array(values, "b"))
        else:
            arguments.append(helper.make_tensor_value_info("b", kind, [s.k, s.n]))
        graph = helper.make_graph([node], f"mm_{s.m}x{s.k}x{s.n}", arguments,
                                  [helper.make_tensor_value_info("c", out, [s.m, s.n])], weights)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    def fetch(self, cache_root: Path) -> Path:
        # the builder's code is part of the key: editing it rebuilds the kernels
        key = digest(["kernel-v2", self.dtype, repr(self.shape), str(WEIGHT_SEED), inspect.getsource(KernelSource),
                      onnx.__version__, np.__version__])

        def build(tmp: Path) -> dict[str, object]:
            onnx.save(self.build(), str(tmp / "model.onnx"))
            return {"shape": self.shape.name, "dtype": self.dtype}

        return Store(cache_root).get_or_build("generated", key, build).file("model.onnx")
