"""ONNX graph builders for the seed-study architectures, with deterministic seeded random weights.

``BUILDERS[name].build(size, seed)`` returns an opset-17 ModelProto with fixed shapes; ``size`` is
``"ci"`` (small input, every layer kept; fast under QEMU) or ``"full"`` (224x224 images, 128 tokens).
``BUILDERS[name].inputs(size)`` are the matching graph inputs with their seeded generators.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import onnx

from pytest_rvv.model.builders import decoder
from pytest_rvv.model.builders.cnn import (
    alexnet,
    googlenet,
    image_inputs,
    mobilenetv2,
    nin,
    resnet18,
    resnet18_inputs,
    squeezenet11,
)
from pytest_rvv.model.builders.transformer import tinybert, tinybert_inputs
from pytest_rvv.model.model import InputSpec
from pytest_rvv.model.selections import REAL_LAYERS, STUDIES

SIZES = ("ci", "full")


@dataclass(frozen=True)
class Builder:
    """One architecture: ``build(size, seed)`` and the graph inputs for ``size``.

    ``selection`` names the ``--rvv-models`` selection that runs it; one that has one is built at one size and is not
    run by default (``selection`` empty: the default run's).
    """

    name: str
    description: str
    family: str
    build: Callable[[str, int], onnx.ModelProto]
    inputs: Callable[[str], tuple[InputSpec, ...]]
    selection: str = ""


REAL_FAMILY = "real-shaped decoder layer"  # built at the dims people deploy: not run unless named
BUILDERS: dict[str, Builder] = {
    b.name: b
    for b in (
        Builder("mobilenetv2", "MobileNetV2 (inverted residuals, depthwise 3x3, ReLU6)", "depthwise CNN",
                mobilenetv2, partial(image_inputs, "mobilenetv2")),
        Builder("squeezenet1.1", "SqueezeNet 1.1 (fire modules: 1x1 squeeze, 1x1 + 3x3 expand, concat)",
                "plain CNN", squeezenet11, partial(image_inputs, "squeezenet1.1")),
        Builder("alexnet", "AlexNet (torchvision, no LRN: 11x11/4 conv, 5x5, 3x3 convs, FC 4096-4096-1000)",
                "large-kernel CNN", alexnet, partial(image_inputs, "alexnet")),
        Builder("nin", "Network in Network, ImageNet (11x11/4 conv, mlpconv blocks of 1x1 convs, global avg pool)",
                "large-kernel CNN", nin, partial(image_inputs, "nin")),
        Builder("googlenet", "GoogLeNet / Inception v1 (9 inception blocks, conv+BN+ReLU, no aux heads)",
                "inception CNN", googlenet, partial(image_inputs, "googlenet")),
        Builder("resnet18", "ResNet18 (torchvision layout, BatchNorm folded into the convs: 7x7/2 stem, 8 BasicBlocks "
                "64-512, global avg pool, FC 1000; 224x224)", "residual CNN", resnet18, resnet18_inputs, STUDIES),
        Builder("tinybert", "TinyBERT 4L-312D (4 encoder layers, 12 heads, GELU FFN 1200)", "transformer encoder",
                tinybert, tinybert_inputs),
        *(Builder(f"llama-{step}{suffix}", f"Llama decoder {what} (2 layers, hidden 64, 4 heads / 2 KV heads, "
                  f"RoPE, SwiGLU 176, vocab 256){weights}", "decoder LLM",
                  partial(build, int8w=bool(suffix)), inputs)
          for step, what, build, inputs in (
              ("prefill", "prefill of 8 tokens (full: 32)", decoder.prefill, decoder.prefill_inputs),
              ("decode", "one decode step over a 16-slot KV cache (full: 64)", decoder.decode, decoder.decode_inputs))
          for suffix, weights in (("", ""), ("-int8w", ", int8 weights (per-channel DequantizeLinear)"))),
        *(Builder(f"{name}-{step}{suffix}", f"one {name.removesuffix('-layer')} decoder layer at its real dims "
                  f"(hidden {dims.hidden}, {dims.heads} heads / {dims.kv_heads} KV heads, RoPE, RMSNorm, SwiGLU "
                  f"{dims.ffn}; vocabulary and LM head reduced to {dims.vocab}), {what}{weights}", REAL_FAMILY,
                  partial(build, dims, int8w=bool(suffix)), partial(inputs, dims), REAL_LAYERS)
          for name, dims in decoder.REAL_LAYERS.items()
          for step, what, build, inputs in (
              ("prefill", f"prefill of {decoder.REAL_PREFILL} tokens", decoder.real_prefill,
               decoder.real_prefill_inputs),
              ("decode", f"one decode step over a {decoder.REAL_CACHE}-slot KV cache", decoder.real_decode,
               decoder.real_decode_inputs))
          for suffix, weights in (("", ""), ("-int8w", ", int8 weights (per-channel DequantizeLinear)"))),
    )
}

__all__ = ["BUILDERS", "REAL_FAMILY", "SIZES", "Builder"]
