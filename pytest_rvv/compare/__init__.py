"""Compare stage: onnxruntime reference outputs and numeric agreement."""
