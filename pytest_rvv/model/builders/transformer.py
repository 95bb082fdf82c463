"""TinyBERT (General TinyBERT 4L-312D) encoder with seeded BERT-style random weights.

Inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` int64 [1, S]; output
``last_hidden_state`` float32 [1, S, 312]. ``size="full"`` is S = 128, ``size="ci"`` S = 32.
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from pytest_rvv.model.builders.graph import GraphBuilder
from pytest_rvv.model.model import InputSpec

LAYERS = 4
HIDDEN = 312
HEADS = 12
HEAD_DIM = HIDDEN // HEADS  # 26
INTERMEDIATE = 1200
VOCAB = 30522
MAX_POSITIONS = 512
TYPE_VOCAB = 2
INIT_STD = 0.02  # BERT's initializer_range
LN_EPS = 1e-12
MASK_VALUE = -10000.0
SEQUENCE = {"full": 128, "ci": 32}


def sequence_length(size: str) -> int:
    if size not in SEQUENCE:
        raise ValueError(f"unknown size {size!r}; expected 'ci' or 'full'")
    return SEQUENCE[size]


def tinybert_inputs(size: str) -> tuple[InputSpec, ...]:
    """Random token ids, a mask of ones and segment 0 everywhere."""
    s = sequence_length(size)
    return (
        InputSpec("input_ids", (1, s), "int64", "integers", 0, VOCAB),
        InputSpec("attention_mask", (1, s), "int64", "ones"),
        InputSpec("token_type_ids", (1, s), "int64", "zeros"),
    )


def _attention(g: GraphBuilder, x: str, mask: str, s: int) -> str:
    def heads(value: str, perm: tuple[int, ...]) -> str:
        return g.transpose(g.reshape(value, (1, s, HEADS, HEAD_DIM)), perm)

    with g.scope("query"):
        q = heads(g.linear(x, HIDDEN, INIT_STD), (0, 2, 1, 3))  # [1, H, S, D]
    with g.scope("key"):
        k = heads(g.linear(x, HIDDEN, INIT_STD), (0, 2, 3, 1))  # [1, H, D, S]
    with g.scope("value"):
        v = heads(g.linear(x, HIDDEN, INIT_STD), (0, 2, 1, 3))  # [1, H, S, D]
    scores = g.div(g.matmul(q, k), g.scalar(math.sqrt(HEAD_DIM), "sqrt_head_dim"))
    probs = g.softmax(g.add(scores, mask), axis=-1)
    context = g.reshape(g.transpose(g.matmul(probs, v), (0, 2, 1, 3)), (1, s, HIDDEN))
    with g.scope("output"):
        return g.layernorm(g.add(g.linear(context, HIDDEN, INIT_STD), x), LN_EPS)


def _feed_forward(g: GraphBuilder, x: str) -> str:
    with g.scope("intermediate"):
        h = g.gelu(g.linear(x, INTERMEDIATE, INIT_STD))
    with g.scope("output"):
        return g.layernorm(g.add(g.linear(h, HIDDEN, INIT_STD), x), LN_EPS)


def tinybert(size: str, seed: int) -> onnx.ModelProto:
    """TinyBERT: embeddings (word + position + token type, LayerNorm) and 4 post-LN encoder layers."""
    s = sequence_length(size)
    g = GraphBuilder("tinybert", seed)
    ids, mask, types = (g.input(spec.name, spec.shape, spec.dtype) for spec in tinybert_inputs(size))
    with g.scope("embeddings"):
        words = g.gather(g.normal((VOCAB, HIDDEN), INIT_STD, "word_embeddings"), ids)
        positions_table = g.normal((MAX_POSITIONS, HIDDEN), INIT_STD, "position_embeddings")
        positions = g.gather(positions_table, g.const(np.arange(s, dtype=np.int64)[None, :], "position_ids"))
        token_types = g.gather(g.normal((TYPE_VOCAB, HIDDEN), INIT_STD, "token_type_embeddings"), types)
        x = g.layernorm(g.add(g.add(words, positions), token_types), LN_EPS)
    with g.scope("extended_attention_mask"):  # (1 - mask) * -10000, broadcast over heads and queries
        keep = g.cast(mask, "float32")
        additive = g.mul(g.sub(g.scalar(1.0, "one"), keep), g.scalar(MASK_VALUE, "mask_value"))
        additive = g.unsqueeze(additive, (1, 2))  # [1, 1, 1, S]
    for layer in range(LAYERS):
        with g.scope(f"encoder.layer.{layer}"):
            with g.scope("attention"):
                x = _attention(g, x, additive, s)
            x = _feed_forward(g, x)
    return g.finish({"last_hidden_state": x})
