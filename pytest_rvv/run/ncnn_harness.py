"""The ncnn peer's harness: a script the riscv64 Python 3.13 runs under QEMU (run/ncnn_peer.py), never imported.

``python3.13 -S -B ncnn_harness.py PACKAGES model.param model.bin --input=@input_0.npy ... --output=@output_0.npy ...
[--threads=N] [--repeat=N] [--maps=@maps.txt] [--no-timings]``

It loads ncnn from ``PACKAGES`` (the PyPI wheel's files), the net converted by pnnx, the seeded inputs as .npy
(without numpy: the guest has the standard library only) and extracts every output ``repeat`` times in one process,
with ``threads`` threads, at float32 (ncnn's fp16 and bf16 storage and arithmetic off: the peer answers at the
model's precision). Inputs are ``in0, in1, ...`` and outputs ``out0, out1, ...`` in the ONNX graph's order (pnnx's
names); a leading batch axis of 1 is dropped for ncnn and given back to each output. Prints ``session_us`` and
``run_us`` unless ``--no-timings`` (a counted run must not: a time's digits cost a time-dependent number of
instructions). A failure is one line on stderr starting ``ncnn_harness: ``: exit 1 when ncnn refused the net (a
layer it lacks, an extract that failed), 2 for arguments and files.
"""

import ast
import os
import sys
import time

PREFIX = "ncnn_harness: "


def fail(code: int, line: str) -> None:
    print(PREFIX + line, file=sys.stderr)
    sys.exit(code)


def read_npy(path: str) -> tuple[tuple[int, ...], bytes]:
    """A little-endian float32 C-order .npy file's shape and bytes."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        fail(2, f"{path}: not an .npy file")
    wide = data[6] >= 2
    start = 12 if wide else 10
    length = int.from_bytes(data[8:start], "little")
    header = ast.literal_eval(data[start:start + length].decode("latin1"))
    if header["descr"] != "<f4" or header["fortran_order"]:
        fail(2, f"{path}: {header['descr']} {'Fortran' if header['fortran_order'] else 'C'}-order: ncnn's harness "
                "reads little-endian float32 in C order")
    return tuple(header["shape"]), data[start + length:]


def write_npy(path: str, shape: tuple[int, ...], payload: bytes) -> None:
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + repr(tuple(shape)) + ", }"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1") + payload)


def main(argv: list[str]) -> int:
    positional = [a for a in argv if not a.startswith("--")]
    options = [a for a in argv if a.startswith("--")]
    if len(positional) != 3:
        fail(2, "usage: ncnn_harness.py PACKAGES model.param model.bin --input=@x.npy ... --output=@y.npy ...")
    packages, param, weights = positional
    inputs = [a.removeprefix("--input=@") for a in options if a.startswith("--input=@")]
    outputs = [a.removeprefix("--output=@") for a in options if a.startswith("--output=@")]
    value = dict(a.split("=", 1) for a in options if a.startswith(("--threads=", "--repeat=", "--maps=")))
    threads, repeat = int(value.get("--threads", "1")), int(value.get("--repeat", "1"))
    timings = "--no-timings" not in options
    sys.path.insert(0, packages)
    # the wheel leaves its fp16 kernels' symbols undefined (they are never called at float32): bind them lazily
    sys.setdlopenflags(os.RTLD_LAZY | os.RTLD_GLOBAL)
    import ncnn

    start = time.perf_counter() if timings else 0.0
    net = ncnn.Net()
    net.opt.num_threads = threads
    net.opt.use_vulkan_compute = False
    for name in ("use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic", "use_bf16_storage"):
        setattr(net.opt, name, False)
    if net.load_param(param) != 0:
        fail(1, f"{param}: ncnn cannot load the net (a layer it does not know?)")
    if net.load_model(weights) != 0:
        fail(1, f"{weights}: ncnn cannot load the weights")
    mats = []
    for i, path in enumerate(inputs):
        shape, payload = read_npy(path)
        if len(shape) > 1 and shape[0] != 1:
            fail(1, f"input {i} has batch {shape[0]}: ncnn runs one item at a time")
        dims = shape[1:] if len(shape) > 1 else shape
        if len(dims) > 4:
            fail(1, f"input {i} has {len(dims)} axes after the batch: ncnn's Mat holds at most 4")
        # ncnn.Mat(buffer) points into the buffer: it must outlive the copy (a temporary's memory is reused)
        buffer = memoryview(bytearray(payload)).cast("f", dims)
        mats.append(ncnn.Mat(buffer).clone())
        del buffer
    session = time.perf_counter() - start if timings else 0.0
    results: list = []
    last = 0.0
    for _ in range(repeat):
        start = time.perf_counter() if timings else 0.0
        extractor = net.create_extractor()
        for i, mat in enumerate(mats):
            if extractor.input(f"in{i}", mat) != 0:
                fail(1, f"the net has no input in{i}")
        results = []
        for i in range(len(outputs)):
            code, mat = extractor.extract(f"out{i}")
            if code != 0:
                fail(1, f"extracting out{i} failed ({code}): a layer ncnn cannot run on this input")
            results.append(mat.clone())
        last = time.perf_counter() - start if timings else 0.0
    for path, mat in zip(outputs if repeat else [], results, strict=True):  # --repeat=0: the load alone, no output
        view = memoryview(mat)
        write_npy(path, (1, *view.shape), view.tobytes())
    if "--maps" in value:
        with open("/proc/self/maps") as src, open(value["--maps"].removeprefix("@"), "w") as dst:
            dst.write(src.read())
    if timings:
        print(f"session_us {int(session * 1e6)}")
        print(f"run_us {int(last * 1e6)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
