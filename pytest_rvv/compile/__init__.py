"""Compile stage: ONNX -> MLIR (iree-import-onnx) -> module (iree-compile), cached by content; microkernels per
dispatch. May import toolchain/, config/, model/ and base/."""
