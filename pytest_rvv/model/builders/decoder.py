"""A Llama-architecture decoder at small dimensions with seeded weights: a prefill graph and a KV-cache decode step.

Llama's blocks, written out in opset-17 ONNX ops: token embedding (Gather), pre-norm RMSNorm (x / sqrt(mean(x²) +
eps) * gamma), rotary position embedding (rotate-half form, cos/sin tables gathered by position), grouped-query
attention (4 query heads share 2 key/value heads, repeated with Expand), a causal mask, a SwiGLU MLP (silu(gate) *
up -> down), a final RMSNorm and the LM head.

- ``llama-prefill``: ``input_ids`` int64 [1, P] -> ``logits`` [1, P, vocab], ``present_keys`` and
  ``present_values`` [layers, 1, kv_heads, P, head_dim] (keys after RoPE).
- ``llama-decode``: one token: ``input_ids`` int64 [1, 1], ``position`` int64 [1], ``past_keys`` and
  ``past_values`` [layers, 1, kv_heads, C, head_dim] (slots ``< position`` are valid) -> ``logits`` [1, 1, vocab]
  and ``present_keys``/``present_values`` of the same shape as the past, with the new token's key and value
  written at slot ``position``. Attention covers the valid slots and the token itself.

Both graphs of one seed share their weights, so a decode step continues a prefill exactly. ``-int8w`` variants
store every MatMul weight as int8 with a per-output-channel float scale (``DequantizeLinear``, weight-only
quantization), from the same float weights. ``size="ci"``: P = 8, C = 16; ``"full"``: P = 32, C = 64.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from pytest_rvv.model.builders.graph import GraphBuilder
from pytest_rvv.model.model import InputSpec


@dataclass(frozen=True)
class Dims:
    """A decoder's dimensions: vocabulary, hidden size, layers, query and key/value heads, FFN, RoPE table length."""

    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    max_positions: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


TOY = Dims(vocab=256, hidden=64, layers=2, heads=4, kv_heads=2, ffn=176, max_positions=64)
# One decoder layer at the real dims (FACTS: Llama-3.2-1B hidden 2048, FFN 8192, 32 heads, 8 KV heads, head dim 64;
# Qwen2.5-0.5B hidden 896, FFN 4864, 14 heads, 2 KV heads, head dim 64); the vocabulary (128256, 151936) and so
# the embedding and LM head are reduced to 256, named as such: the layer is what is measured.
LLAMA_3_2_1B_LAYER = Dims(vocab=256, hidden=2048, layers=1, heads=32, kv_heads=8, ffn=8192, max_positions=256)
QWEN_2_5_0_5B_LAYER = Dims(vocab=256, hidden=896, layers=1, heads=14, kv_heads=2, ffn=4864, max_positions=256)
VOCAB, HIDDEN, LAYERS, HEADS, KV_HEADS, FFN = TOY.vocab, TOY.hidden, TOY.layers, TOY.heads, TOY.kv_heads, TOY.ffn
HEAD_DIM = TOY.head_dim  # 16
MAX_POSITIONS = TOY.max_positions
ROPE_THETA = 10000.0
RMS_EPS = 1e-5
INIT_STD = 0.02
MASKED = -1e9
PREFILL = {"ci": 8, "full": 32}
CACHE = {"ci": 16, "full": 64}
PROJECTIONS = ("q", "k", "v", "o", "gate", "up", "down")


def _lengths(size: str) -> tuple[int, int]:
    if size not in PREFILL:
        raise ValueError(f"unknown size {size!r}; expected 'ci' or 'full'")
    return PREFILL[size], CACHE[size]


def weights(seed: int, dims: Dims = TOY) -> dict[str, np.ndarray]:
    """Every float weight, drawn from one seeded generator in a fixed order (shared by both graphs)."""
    rng = np.random.default_rng(seed)
    hidden, kv, ffn, vocab = dims.hidden, dims.kv_heads * dims.head_dim, dims.ffn, dims.vocab

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(INIT_STD)).astype(np.float32)

    shapes = {"q": (hidden, hidden), "k": (hidden, kv), "v": (hidden, kv),
              "o": (hidden, hidden), "gate": (hidden, ffn), "up": (hidden, ffn), "down": (ffn, hidden)}
    found = {"embed": normal(vocab, hidden) * np.float32(50)}  # embeddings of unit-ish scale
    for layer in range(dims.layers):
        found[f"{layer}.attn_norm"] = rng.uniform(0.8, 1.2, hidden).astype(np.float32)
        found[f"{layer}.mlp_norm"] = rng.uniform(0.8, 1.2, hidden).astype(np.float32)
        for name in PROJECTIONS:
            found[f"{layer}.{name}"] = normal(*shapes[name])
    found["final_norm"] = rng.uniform(0.8, 1.2, hidden).astype(np.float32)
    found["lm_head"] = normal(hidden, vocab) * np.float32(10)
    return found


def rope_tables(dims: Dims = TOY) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [max_positions, head_dim] of the rotate-half RoPE (frequencies repeated over both halves)."""
    head_dim = dims.head_dim
    inverse = 1.0 / ROPE_THETA ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(dims.max_positions, dtype=np.float64), inverse)
    angles = np.concatenate([angles, angles], axis=-1)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


class _Decoder:
    """Builds the layers on a GraphBuilder from the shared float weights (``int8w``: weight-only int8)."""

    def __init__(self, g: GraphBuilder, w: dict[str, np.ndarray], int8w: bool, dims: Dims = TOY) -> None:
        self.g, self.w, self.int8w, self.dims = g, w, int8w, dims
        cos, sin = rope_tables(dims)
        self.cos, self.sin = g.const(cos, "rope_cos"), g.const(sin, "rope_sin")

    def weight(self, name: str) -> str:
        """A MatMul weight: the float initializer, or int8 + per-output-channel scale through DequantizeLinear."""
        w = self.w[name]
        if not self.int8w:
            return self.g.const(w, "weight")
        scale = np.maximum(np.abs(w).max(axis=0), np.float32(1e-8)) / np.float32(127)
        quantized = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        q, s = self.g.const(quantized, "weight_int8"), self.g.const(scale.astype(np.float32), "weight_scale")
        zero = self.g.const(np.zeros(w.shape[1], dtype=np.int8), "weight_zero_point")
        return self.g.node("DequantizeLinear", [q, s, zero], w.shape, axis=1)

    def project(self, x: str, name: str) -> str:
        return self.g.matmul(x, self.weight(name))

    def rmsnorm(self, x: str, gamma: str) -> str:
        g = self.g
        mean = g.node("ReduceMean", [g.mul(x, x)], (*g.shape(x)[:-1], 1), axes=[-1], keepdims=1)
        root = g.node("Sqrt", [g.add(mean, g.scalar(RMS_EPS, "rms_eps"))], g.shape(mean))
        return g.mul(g.div(x, root), g.const(self.w[gamma], "rms_gamma"))

    def rope(self, x: str, cos: str, sin: str) -> str:
        """x [1, heads, S, D] rotated by the angles of its positions (cos, sin: [1, 1, S, D])."""
        g, head_dim = self.g, self.dims.head_dim
        half = head_dim // 2
        shape = g.shape(x)
        first = g.node("Slice", [x, *self._ints([0], [half], [3])], (*shape[:3], half))
        second = g.node("Slice", [x, *self._ints([half], [head_dim], [3])], (*shape[:3], half))
        rotated = g.concat([g.node("Neg", [second], g.shape(second)), first], axis=3)
        return g.add(g.mul(x, cos), g.mul(rotated, sin))

    def _ints(self, *values: list[int]) -> list[str]:
        return [self.g.const(np.array(v, dtype=np.int64), "slice") for v in values]

    def angles(self, positions: str, count: int) -> tuple[str, str]:
        """cos and sin [1, 1, count, D] at ``positions`` (int64 [count])."""
        g = self.g
        return tuple(g.reshape(g.gather(table, positions), (1, 1, count, self.dims.head_dim))
                     for table in (self.cos, self.sin))

    def heads(self, x: str, count: int, length: int) -> str:
        """[1, S, count * D] -> [1, count, S, D]."""
        return self.g.transpose(self.g.reshape(x, (1, length, count, self.dims.head_dim)), (0, 2, 1, 3))

    def repeat_kv(self, x: str, length: int) -> str:
        """[1, KV, S, D] -> [1, HEADS, S, D]: each key/value head serves HEADS / KV_HEADS query heads."""
        g, d = self.g, self.dims
        group, kv, head_dim = d.heads // d.kv_heads, d.kv_heads, d.head_dim
        expanded = g.node("Expand", [g.reshape(x, (1, kv, 1, length, head_dim)),
                                     g.const(np.array([1, kv, group, length, head_dim], dtype=np.int64),
                                             "shape")], (1, kv, group, length, head_dim))
        return g.reshape(expanded, (1, d.heads, length, head_dim))

    def attend(self, q: str, k: str, v: str, mask: str, queries: int, keys: int) -> str:
        """softmax(q k^T / sqrt(D) + mask) v for [1, HEADS, queries, D] over [1, HEADS, keys, D] -> [1, S, HIDDEN]."""
        g = self.g
        scores = g.div(g.matmul(q, g.transpose(k, (0, 1, 3, 2))),
                       g.scalar(math.sqrt(self.dims.head_dim), "sqrt_head_dim"))
        context = g.matmul(g.softmax(g.add(scores, mask), axis=-1), v)
        return g.reshape(g.transpose(context, (0, 2, 1, 3)), (1, queries, self.dims.hidden))

    def mlp(self, x: str) -> str:
        g = self.g
        gate = self.project(x, self._layer + ".gate")
        silu = g.mul(gate, g.node("Sigmoid", [gate], g.shape(gate)))
        return self.project(g.mul(silu, self.project(x, self._layer + ".up")), self._layer + ".down")

    def layer(self, index: int, x: str, attention: Callable[[str, str, str], str]) -> str:
        """One pre-norm decoder layer; ``attention(q, k, v)`` (head-shaped, after RoPE) -> [1, S, HIDDEN]."""
        self._layer = str(index)
        with self.g.scope(f"layers.{index}"):
            h = self.rmsnorm(x, f"{index}.attn_norm")
            q, k, v = (self.project(h, f"{index}.{name}") for name in ("q", "k", "v"))
            x = self.g.add(x, self.project(attention(q, k, v), f"{index}.o"))
            return self.g.add(x, self.mlp(self.rmsnorm(x, f"{index}.mlp_norm")))

    def logits(self, x: str) -> str:
        return self.g.matmul(self.rmsnorm(x, "final_norm"), self.weight("lm_head"))


def prefill_graph(length: int, seed: int, int8w: bool = False, dims: Dims = TOY) -> onnx.ModelProto:
    """The prefill graph over ``length`` tokens (see the module docstring)."""
    g = GraphBuilder("llama_prefill", seed)
    d = _Decoder(g, weights(seed, dims), int8w, dims)
    ids = g.input("input_ids", (1, length), "int64")
    x = g.gather(g.const(d.w["embed"], "embed_tokens"), ids)
    cos, sin = d.angles(g.const(np.arange(length, dtype=np.int64), "positions"), length)
    causal = np.triu(np.full((length, length), MASKED, dtype=np.float32), k=1)[None, None]
    mask = g.const(causal, "causal_mask")
    keys, values = [], []

    def attention(q: str, k: str, v: str) -> str:
        q = d.rope(d.heads(q, dims.heads, length), cos, sin)
        k = d.rope(d.heads(k, dims.kv_heads, length), cos, sin)
        v = d.heads(v, dims.kv_heads, length)
        keys.append(g.unsqueeze(k, (0,)))
        values.append(g.unsqueeze(v, (0,)))
        return d.attend(q, d.repeat_kv(k, length), d.repeat_kv(v, length), mask, length, length)

    for index in range(dims.layers):
        x = d.layer(index, x, attention)
    return g.finish({"logits": d.logits(x), "present_keys": g.concat(keys, axis=0),
                     "present_values": g.concat(values, axis=0)})


def decode_graph(capacity: int, seed: int, int8w: bool = False, dims: Dims = TOY) -> onnx.ModelProto:
    """One decode step with a KV cache of ``capacity`` slots (see the module docstring)."""
    g = GraphBuilder("llama_decode", seed)
    d = _Decoder(g, weights(seed, dims), int8w, dims)
    ids = g.input("input_ids", (1, 1), "int64")
    position = g.input("position", (1,), "int64")
    cache = (dims.layers, 1, dims.kv_heads, capacity, dims.head_dim)
    past_keys, past_values = g.input("past_keys", cache), g.input("past_values", cache)
    x = g.gather(g.const(d.w["embed"], "embed_tokens"), ids)
    cos, sin = d.angles(position, 1)
    slots = g.const(np.arange(capacity, dtype=np.int64), "slots")
    valid = g.node("Less", [slots, position], (capacity,), "bool")
    zero, masked = g.scalar(0.0, "zero"), g.scalar(MASKED, "masked")
    past_mask = g.node("Where", [valid, zero, masked], (capacity,))
    mask = g.reshape(g.concat([past_mask, g.const(np.zeros(1, dtype=np.float32), "self")], axis=0),
                     (1, 1, 1, capacity + 1))
    here = g.reshape(g.node("Equal", [slots, position], (capacity,), "bool"), (1, 1, capacity, 1))
    new_keys, new_values = [], []

    def layer_slice(stacked: str, index: int) -> str:
        sliced = g.node("Slice", [stacked, *d._ints([index], [index + 1], [0])], (1, *cache[1:]))
        return g.reshape(sliced, cache[1:])

    for index in range(dims.layers):
        past_k, past_v = layer_slice(past_keys, index), layer_slice(past_values, index)

        def attention(q: str, k: str, v: str, past_k: str = past_k, past_v: str = past_v) -> str:
            q = d.rope(d.heads(q, dims.heads, 1), cos, sin)
            k = d.rope(d.heads(k, dims.kv_heads, 1), cos, sin)
            v = d.heads(v, dims.kv_heads, 1)
            new_keys.append(g.unsqueeze(g.node("Where", [here, k, past_k], cache[1:]), (0,)))
            new_values.append(g.unsqueeze(g.node("Where", [here, v, past_v], cache[1:]), (0,)))
            all_k, all_v = g.concat([past_k, k], axis=2), g.concat([past_v, v], axis=2)
            return d.attend(q, d.repeat_kv(all_k, capacity + 1), d.repeat_kv(all_v, capacity + 1), mask, 1,
                            capacity + 1)

        x = d.layer(index, x, attention)
    return g.finish({"logits": d.logits(x), "present_keys": g.concat(new_keys, axis=0),
                     "present_values": g.concat(new_values, axis=0)})


def prefill(size: str, seed: int, int8w: bool = False) -> onnx.ModelProto:
    return prefill_graph(_lengths(size)[0], seed, int8w)


def decode(size: str, seed: int, int8w: bool = False) -> onnx.ModelProto:
    return decode_graph(_lengths(size)[1], seed, int8w)


def prefill_inputs(size: str) -> tuple[InputSpec, ...]:
    """Random token ids."""
    return (InputSpec("input_ids", (1, _lengths(size)[0]), "int64", "integers", 0, VOCAB),)


def decode_inputs(size: str) -> tuple[InputSpec, ...]:
    """The token after a prefill of P tokens: position P, a cache whose first P slots hold N(0, 1) keys/values."""
    length, capacity = _lengths(size)
    cache = (LAYERS, 1, KV_HEADS, capacity, HEAD_DIM)
    return (
        InputSpec("input_ids", (1, 1), "int64", "integers", 0, VOCAB),
        InputSpec("position", (1,), "int64", "integers", length, length + 1),
        InputSpec("past_keys", cache, "float32", "normal", 0.0, 1.0),
        InputSpec("past_values", cache, "float32", "normal", 0.0, 1.0),
    )


# The real-shaped layers: a prefill of 32 tokens and one decode step over a KV cache of 128 (both fixed: the shapes
# people deploy do not shrink for CI).
REAL_LAYERS = {"llama-3.2-1b-layer": LLAMA_3_2_1B_LAYER, "qwen2.5-0.5b-layer": QWEN_2_5_0_5B_LAYER}
REAL_PREFILL, REAL_CACHE = 32, 128


def real_prefill(dims: Dims, size: str, seed: int, int8w: bool = False) -> onnx.ModelProto:
    """One layer at ``dims`` over a prefill of REAL_PREFILL tokens (``size`` does not change it)."""
    return prefill_graph(REAL_PREFILL, seed, int8w, dims)


def real_decode(dims: Dims, size: str, seed: int, int8w: bool = False) -> onnx.ModelProto:
    """One decode step of one layer at ``dims`` over a KV cache of REAL_CACHE slots (``size`` does not change it)."""
    return decode_graph(REAL_CACHE, seed, int8w, dims)


def real_prefill_inputs(dims: Dims, size: str) -> tuple[InputSpec, ...]:
    return (InputSpec("input_ids", (1, REAL_PREFILL), "int64", "integers", 0, dims.vocab),)


def real_decode_inputs(dims: Dims, size: str) -> tuple[InputSpec, ...]:
    """The token after a prefill of REAL_PREFILL tokens: the cache's first REAL_PREFILL slots hold N(0, 1) values."""
    cache = (dims.layers, 1, dims.kv_heads, REAL_CACHE, dims.head_dim)
    return (
        InputSpec("input_ids", (1, 1), "int64", "integers", 0, dims.vocab),
        InputSpec("position", (1,), "int64", "integers", REAL_PREFILL, REAL_PREFILL + 1),
        InputSpec("past_keys", cache, "float32", "normal", 0.0, 1.0),
        InputSpec("past_values", cache, "float32", "normal", 0.0, 1.0),
    )
