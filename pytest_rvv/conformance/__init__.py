"""ONNX backend node tests (onnx==1.22.0) compiled and run on every target."""
