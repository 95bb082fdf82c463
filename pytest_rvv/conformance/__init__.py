"""ONNX backend node tests (onnx==1.22.0) compiled and run on every target.
May import judge/ and below (not comparison/, its sibling)."""
