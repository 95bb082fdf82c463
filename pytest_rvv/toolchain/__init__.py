"""The toolchain as a unit: compiler tools, their environments, and the runtimes their modules load in.

- toolchain.py: a Toolchain value (iree-compile, iree-import-onnx, version line, commit);
- environments.py: a released toolchain installed with pip into the tools cache;
- iree_source.py: IREE source trees, tarballs and git clones, by commit;
- runtime_build.py: a riscv64 ``iree-run-module`` built from one of those sources;
- runtimes.py: the runtime per architecture, and choice.py: which riscv64 runtime a toolchain gets.

May import config/, model/ and base/.
"""
