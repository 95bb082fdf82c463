"""Compile stage: ONNX -> MLIR (iree-import-onnx) -> module (iree-compile), cached by content."""
