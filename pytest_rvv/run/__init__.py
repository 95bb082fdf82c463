"""Run stage: runners (host, QEMU, boards), onnxruntime's reference outputs, recorded runs, the QEMU plugin and RSS
probe it builds (C sources here), SIGILL diagnosis. May import compile/, toolchain/, config/, model/ and base/."""
