"""GraphBuilder: a small, shape-tracking layer over ``onnx.helper`` with seeded weights.

Every tensor the builder creates gets a deterministic name (scope prefix + counter) and its static
shape is tracked, so layers infer their input channels and the graph output gets a fixed shape.
Weights come from one ``numpy.random.default_rng(seed)`` in creation order: the same calls with
the same seed give a byte-identical model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
_ELEM = {
    np.dtype("float32"): TensorProto.FLOAT,
    np.dtype("int64"): TensorProto.INT64,
}


def graph_name(name: str) -> str:
    """``name`` with every non-identifier character replaced by ``_`` (IREE's function name)."""
    cleaned = re.sub(r"\W", "_", name)
    return cleaned if not cleaned[:1].isdigit() else f"_{cleaned}"


def _pool_out(size: int, kernel: int, stride: int, pad_total: int, ceil: bool) -> int:
    span = size + pad_total - kernel
    if span < 0:
        raise ValueError(f"window {kernel} larger than padded input {size + pad_total}")
    return (-(-span // stride) if ceil else span // stride) + 1


class GraphBuilder:
    """Accumulates nodes, initializers and static shapes; ``finish()`` returns a checked ModelProto."""

    def __init__(self, name: str, seed: int) -> None:
        self.name = graph_name(name)
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.dtypes: dict[str, np.dtype] = {}
        self._scope: list[str] = []
        self._counts: dict[str, int] = {}

    # naming and bookkeeping
    @contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Prefix the names created inside with ``name.`` (readable graphs, e.g. ``features.3.conv``)."""
        self._scope.append(name)
        try:
            yield
        finally:
            self._scope.pop()

    def _fresh(self, hint: str) -> str:
        base = ".".join([*self._scope, hint])
        count = self._counts.get(base, 0)
        self._counts[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def shape(self, value: str) -> tuple[int, ...]:
        return self.shapes[value]

    def _node(self, op: str, inputs: Sequence[str], shape: Sequence[int], dtype: str = "float32",
              **attrs: object) -> str:
        out = self._fresh(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=f"{out}/{op}", **attrs))
        self.shapes[out] = tuple(int(d) for d in shape)
        self.dtypes[out] = np.dtype(dtype)
        return out

    def node(self, op: str, inputs: Sequence[str], shape: Sequence[int], dtype: str = "float32",
             **attrs: object) -> str:
        """Any other operator: ``op`` on ``inputs``, whose output has the static ``shape``."""
        return self._node(op, inputs, shape, dtype, **attrs)

    # graph inputs and constants
    def input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> str:
        """Declare a graph input with a fixed shape."""
        dt = np.dtype(dtype)
        self.inputs.append(helper.make_tensor_value_info(name, _ELEM[dt], list(shape)))
        self.shapes[name], self.dtypes[name] = tuple(shape), dt
        return name

    def const(self, array: np.ndarray, hint: str = "const") -> str:
        """An initializer holding ``array`` (float64 is stored as float32)."""
        array = np.asarray(array)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        name = self._fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.array(array, order="C"), name))
        self.shapes[name], self.dtypes[name] = tuple(array.shape), array.dtype
        return name

    def normal(self, shape: Sequence[int], std: float, hint: str = "weight") -> str:
        """A seeded N(0, std²) float32 initializer."""
        return self.const((self.rng.standard_normal(tuple(shape), dtype=np.float32) * np.float32(std)), hint)

    def uniform(self, shape: Sequence[int], low: float, high: float, hint: str) -> str:
        """A seeded U(low, high) float32 initializer."""
        return self.const(self.rng.uniform(low, high, tuple(shape)).astype(np.float32), hint)

    def scalar(self, value: float, hint: str = "scalar") -> str:
        return self.const(np.array(value, dtype=np.float32), hint)

    # convolutional layers
    def conv(self, x: str, out_channels: int, kernel: int, stride: int = 1, pad: int = 0, group: int = 1,
             bias: bool = True) -> str:
        """2-D convolution (NCHW, square kernel), He-initialised (std = sqrt(2 / fan_in))."""
        n, c, h, w = self.shape(x)
        if c % group or out_channels % group:
            raise ValueError(f"conv: channels {c}->{out_channels} not divisible by group {group}")
        fan_in = c // group * kernel * kernel
        inputs = [x, self.normal((out_channels, c // group, kernel, kernel), math.sqrt(2.0 / fan_in), "weight")]
        if bias:
            inputs.append(self.uniform((out_channels,), -0.05, 0.05, "bias"))
        oh, ow = (_pool_out(s, kernel, stride, 2 * pad, False) for s in (h, w))
        return self._node("Conv", inputs, (n, out_channels, oh, ow), kernel_shape=[kernel, kernel],
                          strides=[stride, stride], pads=[pad] * 4, dilations=[1, 1], group=group)

    def batchnorm(self, x: str, eps: float = 1e-5) -> str:
        """Inference BatchNormalization: gamma ~ U(0.8, 1.2), beta ~ U(-0.1, 0.1), mean ~ N(0, 0.1²),
        var ~ U(0.5, 1.5)."""
        c = self.shape(x)[1]
        params = [
            self.uniform((c,), 0.8, 1.2, "gamma"),
            self.uniform((c,), -0.1, 0.1, "beta"),
            self.normal((c,), 0.1, "running_mean"),
            self.uniform((c,), 0.5, 1.5, "running_var"),
        ]
        return self._node("BatchNormalization", [x, *params], self.shape(x), epsilon=eps)

    def maxpool(self, x: str, kernel: int, stride: int, pad: int = 0, ceil: bool = False) -> str:
        n, c, h, w = self.shape(x)
        oh, ow = (_pool_out(s, kernel, stride, 2 * pad, ceil) for s in (h, w))
        return self._node("MaxPool", [x], (n, c, oh, ow), kernel_shape=[kernel, kernel], strides=[stride, stride],
                          pads=[pad] * 4, ceil_mode=int(ceil))

    def avgpool(self, x: str, kernel: int, stride: int, pad: int = 0) -> str:
        n, c, h, w = self.shape(x)
        oh, ow = (_pool_out(s, kernel, stride, 2 * pad, False) for s in (h, w))
        return self._node("AveragePool", [x], (n, c, oh, ow), kernel_shape=[kernel, kernel],
                          strides=[stride, stride], pads=[pad] * 4, count_include_pad=0)

    def global_avgpool(self, x: str) -> str:
        n, c, _, _ = self.shape(x)
        return self._node("GlobalAveragePool", [x], (n, c, 1, 1))

    # elementwise
    def relu(self, x: str) -> str:
        return self._node("Relu", [x], self.shape(x))

    def clip(self, x: str, low: float, high: float) -> str:
        return self._node("Clip", [x, self.scalar(low, "clip_min"), self.scalar(high, "clip_max")], self.shape(x))

    def relu6(self, x: str) -> str:
        """ReLU6 as ``Clip(x, 0, 6)``."""
        return self.clip(x, 0.0, 6.0)

    def _broadcast(self, a: str, b: str) -> tuple[int, ...]:
        return tuple(int(d) for d in np.broadcast_shapes(self.shape(a), self.shape(b)))

    def add(self, a: str, b: str) -> str:
        return self._node("Add", [a, b], self._broadcast(a, b), str(self.dtypes[a]))

    def sub(self, a: str, b: str) -> str:
        return self._node("Sub", [a, b], self._broadcast(a, b), str(self.dtypes[a]))

    def mul(self, a: str, b: str) -> str:
        return self._node("Mul", [a, b], self._broadcast(a, b), str(self.dtypes[a]))

    def div(self, a: str, b: str) -> str:
        return self._node("Div", [a, b], self._broadcast(a, b), str(self.dtypes[a]))

    def erf(self, x: str) -> str:
        return self._node("Erf", [x], self.shape(x))

    def cast(self, x: str, dtype: str) -> str:
        return self._node("Cast", [x], self.shape(x), dtype, to=_ELEM[np.dtype(dtype)])

    def gelu(self, x: str) -> str:
        """Exact GELU written out: ``0.5 * x * (1 + Erf(x / sqrt(2)))``."""
        inner = self.erf(self.div(x, self.scalar(math.sqrt(2.0), "sqrt2")))
        return self.mul(self.mul(x, self.add(inner, self.scalar(1.0, "one"))), self.scalar(0.5, "half"))

    # shape manipulation
    def concat(self, xs: Sequence[str], axis: int = 1) -> str:
        shapes = [self.shape(x) for x in xs]
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        return self._node("Concat", list(xs), out, axis=axis)

    def reshape(self, x: str, shape: Sequence[int]) -> str:
        """Reshape to a fully static ``shape`` (no -1 or 0)."""
        if math.prod(shape) != math.prod(self.shape(x)):
            raise ValueError(f"reshape {self.shape(x)} -> {tuple(shape)}: element counts differ")
        target = self.const(np.array(shape, dtype=np.int64), "shape")
        return self._node("Reshape", [x, target], shape, str(self.dtypes[x]))

    def flatten(self, x: str) -> str:
        s = self.shape(x)
        return self._node("Flatten", [x], (s[0], math.prod(s[1:])), axis=1)

    def transpose(self, x: str, perm: Sequence[int]) -> str:
        s = self.shape(x)
        return self._node("Transpose", [x], [s[p] for p in perm], str(self.dtypes[x]), perm=list(perm))

    def unsqueeze(self, x: str, axes: Sequence[int]) -> str:
        out = list(self.shape(x))
        for axis in sorted(a if a >= 0 else a + len(out) + len(axes) for a in axes):
            out.insert(axis, 1)
        return self._node("Unsqueeze", [x, self.const(np.array(axes, dtype=np.int64), "axes")], out,
                          str(self.dtypes[x]))

    def gather(self, table: str, indices: str) -> str:
        """Rows of ``table`` (axis 0) at ``indices``: an embedding lookup."""
        return self._node("Gather", [table, indices], (*self.shape(indices), *self.shape(table)[1:]), axis=0)

    # dense layers and normalisation
    def gemm(self, x: str, out_features: int, std: float | None = None) -> str:
        """Fully connected ``x[N, in] @ W[out, in]^T + b`` (torch Linear layout, transB=1); He-initialised."""
        n, fan_in = self.shape(x)
        w = self.normal((out_features, fan_in), std if std is not None else math.sqrt(2.0 / fan_in), "weight")
        b = self.uniform((out_features,), -0.05, 0.05, "bias")
        return self._node("Gemm", [x, w, b], (n, out_features), transB=1)

    def matmul(self, a: str, b: str) -> str:
        sa, sb = self.shape(a), self.shape(b)
        if sa[-1] != sb[-2]:
            raise ValueError(f"matmul {sa} x {sb}: inner dimensions differ")
        batch = np.broadcast_shapes(sa[:-2], sb[:-2])
        return self._node("MatMul", [a, b], (*batch, sa[-2], sb[-1]))

    def linear(self, x: str, out_features: int, std: float) -> str:
        """``x[..., in] @ W[in, out] + b`` as MatMul + Add, W ~ N(0, std²), b = 0 (BERT-style)."""
        w = self.normal((self.shape(x)[-1], out_features), std, "weight")
        return self.add(self.matmul(x, w), self.const(np.zeros(out_features, dtype=np.float32), "bias"))

    def layernorm(self, x: str, eps: float = 1e-12) -> str:
        """LayerNormalization over the last axis, gamma = 1, beta = 0."""
        d = self.shape(x)[-1]
        gamma = self.const(np.ones(d, dtype=np.float32), "gamma")
        beta = self.const(np.zeros(d, dtype=np.float32), "beta")
        return self._node("LayerNormalization", [x, gamma, beta], self.shape(x), axis=-1, epsilon=eps)

    def softmax(self, x: str, axis: int = -1) -> str:
        return self._node("Softmax", [x], self.shape(x), axis=axis)

    # result
    def finish(self, outputs: dict[str, str]) -> onnx.ModelProto:
        """Rename each value to its output name (``{output_name: value}``), build and check the model."""
        declared = []
        for out_name, value in outputs.items():
            producer = next((n for n in reversed(self.nodes) if value in n.output), None)
            if producer is None:
                raise ValueError(f"output {out_name!r}: {value!r} is not produced by a node")
            for node in self.nodes:  # rename the value everywhere it appears
                node.input[:] = [out_name if i == value else i for i in node.input]
                node.output[:] = [out_name if o == value else o for o in node.output]
            dtype = _ELEM[self.dtypes[value]]
            declared.append(helper.make_tensor_value_info(out_name, dtype, list(self.shapes[value])))
        graph = helper.make_graph(self.nodes, self.name, self.inputs, declared, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="pytest-rvv builders")
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        return model
