"""A reproducer folder for one regressed model x target of a toolchain comparison.

Everything a compiler engineer needs, with no pytest-rvv: the prepared .onnx, each toolchain's
imported MLIR, the seeded inputs and onnxruntime's outputs (.npy), both compilers' version lines,
``compile.sh`` (the exact compile flags; each compiler dumps every dispatch's executable source
and assembly), ``run.sh`` (both modules run the way the suite ran them, QEMU with its vlen
included, times shown and outputs checked by ``check.py``, which needs no numpy: a stock python3
runs it), the riscv64 runtime for a riscv64 target, and a README with the commands that show the
difference. Written once here, and run once (``compile.sh``)
so the folder already holds the dumps.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import numpy as np

from pytest_rvv.comparison.ab import ToolchainComparison
from pytest_rvv.config.targets import HOST, RISCV64, Target
from pytest_rvv.model.model import Model, Tolerance
from pytest_rvv.run.runner import GUEST_ADDRESS_SPACE
from pytest_rvv.session import RvvSession

SIDES = ("reference", "under-test")
_CHECK = '''"""Compare each side's outputs with onnxruntime's (expected_*.npy): max abs error per output, and whether
every element agrees within pytest-rvv's tolerance for the model: |got - expected| <= atol + steps * step + rtol *
|expected| (NaN vs NaN agrees; step: the output's quantization step, int8 models). Exits 1 when one does not.
Only Python's standard library (3.8+): the .npy files are read here, so any python3 runs it, numpy or not."""
import ast
import itertools
import math
import struct
import sys
from pathlib import Path

ATOL, RTOL, STEPS = @TOLERANCE@  # pytest-rvv's tolerance for this model (@DESCRIBED@)
OUTPUT_STEPS = @OUTPUT_STEPS@  # each output's quantization step (int8 models), None for a float output
CODES = {"f2": "e", "f4": "f", "f8": "d", "i1": "b", "i2": "h", "i4": "i", "i8": "q",
         "u1": "B", "u2": "H", "u4": "I", "u8": "Q", "b1": "?"}  # .npy dtype -> struct code
ORDERS = {"<": "<", ">": ">", "|": "<", "=": "<" if sys.byteorder == "little" else ">"}


def load(path):
    """A .npy file (format 1.0 to 3.0) as (dtype, shape, values in C order)."""
    data = path.read_bytes()
    if data[:6] != b"\\x93NUMPY":
        sys.exit(f"{path.name}: not a .npy file")
    size, start = ("<H", 10) if data[6] == 1 else ("<I", 12)
    (length,) = struct.unpack_from(size, data, 8)
    header = ast.literal_eval(data[start:start + length].decode("latin1" if data[6] < 3 else "utf8"))
    descr, shape = header["descr"], tuple(header["shape"])
    if not isinstance(descr, str) or descr[:1] not in ORDERS or descr[1:] not in CODES:
        sys.exit(f"{path.name}: dtype {descr!r} is not one check.py reads")
    count = math.prod(shape)
    values = struct.unpack_from(f"{ORDERS[descr[0]]}{count}{CODES[descr[1:]]}", data, start + length)
    if header["fortran_order"] and len(shape) > 1:  # column-major on disk: read it in C order
        strides = [math.prod(shape[:k]) for k in range(len(shape))]
        values = [values[sum(i * s for i, s in zip(index, strides))]
                  for index in itertools.product(*(range(n) for n in shape))]
    return descr[1:], shape, values


def compare(got, expected, step):
    """(max abs error, elements beyond the tolerance), counted as pytest-rvv's agreement check counts them."""
    atol = ATOL + (STEPS * step if step else 0.0)
    worst, bad = 0.0, 0
    for a, e in zip(got, expected):
        if a == e or (a != a and e != e):  # equal (infinities too), or NaN vs NaN
            continue
        diff = abs(float(a) - float(e))
        diff = math.inf if diff != diff else diff
        worst = max(worst, diff)
        if diff > atol + RTOL * abs(e) or not (math.isfinite(a) and math.isfinite(e)):
            bad += 1
    return worst, bad


here = Path(__file__).parent
expected = sorted(here.glob("expected_*.npy"))
failed = []
for side in sys.argv[1:]:
    for path in expected:
        got = here / side / path.name.replace("expected", "output")
        if not got.is_file():
            print(f"{side}: {got.name} missing")
            failed.append(f"{side}/{got.name}")
            continue
        (kind, shape, values), (want_kind, want_shape, want) = load(got), load(path)
        if shape != want_shape or kind[0] != want_kind[0]:
            print(f"{side}: {got.name} is {kind}{list(shape)}, onnxruntime's is {want_kind}{list(want_shape)}")
            failed.append(f"{side}/{got.name}")
            continue
        index = int(path.stem.split("_")[1])
        error, bad = compare(values, want, OUTPUT_STEPS[index] if index < len(OUTPUT_STEPS) else None)
        beyond = f", {bad}/{len(want)} elements beyond the tolerance" if bad else ""
        print(f"{side}: {got.name} max abs error vs onnxruntime {error:.3g}{beyond}")
        if bad:
            failed.append(f"{side}/{got.name}")
if failed:
    sys.exit(f"disagrees with onnxruntime (@DESCRIBED@): {', '.join(failed)}")
print("all outputs agree with onnxruntime (@DESCRIBED@)")
'''


def write_repro(directory: Path, comparison: ToolchainComparison, under_test: RvvSession, reference: RvvSession,
                model: Model, target: Target) -> Path:
    """Write (and compile once) the reproducer of ``comparison`` into ``directory``; return its README."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    shutil.copyfile(under_test.prepared(model), directory / "model.onnx")
    expected = under_test.oracle(model)
    for i, array in enumerate(expected.inputs):
        np.save(directory / f"input_{i}.npy", array, allow_pickle=False)
    for i, array in enumerate(expected.outputs):
        np.save(directory / f"expected_{i}.npy", array, allow_pickle=False)
    sessions = dict(zip(SIDES, (reference, under_test), strict=True))
    compilers, functions = {}, {}
    for side, session in sessions.items():
        imported = session.imported(model)
        shutil.copyfile(imported.path, directory / f"{side}.mlir")
        compilers[side] = session.toolchain.iree_compile
        functions[side] = imported.function
    (directory / "versions.txt").write_text("".join(
        f"{side}: {session.toolchain.compiler_version}\n  from {session.toolchain.origin}\n"
        for side, session in sessions.items()))
    flags = " ".join(shlex.quote(f) for f in target.compiler_flags())
    compile_lines = ["#!/usr/bin/env bash", "# Compile the model with both compilers (override their paths with the "
                     "variables); each dumps", "# its dispatches' executable sources and assembly into <side>/.",
                     "set -euo pipefail", 'cd "$(dirname "$0")"']
    for side, compiler in compilers.items():
        var = f"IREE_COMPILE_{side.upper().replace('-', '_')}"
        compile_lines += [
            f": \"${{{var}:={shlex.quote(str(compiler))}}}\"",
            f"mkdir -p {side}",
            f"\"${var}\" {side}.mlir {flags} --iree-hal-dump-executable-sources-to={side}/sources "
            f"--iree-hal-dump-executable-intermediates-to={side}/intermediates -o {side}/module.vmfb",
            f"echo \"{side}: $(\"${var}\" --version | grep 'compiler version') -> {side}/module.vmfb "
            f"($(stat -c %s {side}/module.vmfb) bytes)\""]
    _script(directory / "compile.sh", compile_lines)
    _script(directory / "run.sh", _run_lines(directory, sessions, functions, target, len(expected.inputs),
                                             len(expected.outputs)))
    (directory / "check.py").write_text(_check(model.tolerance, expected.steps))
    _script(directory / "dispatch.sh", [
        "#!/usr/bin/env bash", "# The assembly of one dispatch, from <side>/intermediates/*.s (written by compile.sh):",
        "#   bash dispatch.sh reference dispatch_15_conv_128x4x4x32x3x3_f32", "set -euo pipefail",
        'cd "$(dirname "$0")"',
        """awk -v name="$2" '$0 ~ ("[$_]" name ":$") {on=1} on {print} on && /^[.]Lfunc_end/ {exit}' \\""",
        '    "$1"/intermediates/*.s'])
    if comparison.asm is not None:
        (directory / "asm.diff").write_text("\n".join(comparison.asm[1]) + "\n")
    readme = directory / "README.md"
    readme.write_text(_readme(comparison, target, model.tolerance))
    subprocess.run(["bash", str(directory / "compile.sh")], capture_output=True, text=True, timeout=3600,
                   check=False)
    return readme


def _run_lines(directory: Path, sessions: dict[str, RvvSession], functions: dict[str, str], target: Target,
               inputs: int, outputs: int) -> list[str]:
    lines = ["#!/usr/bin/env bash", "# Run both modules the way pytest-rvv did, on the seeded inputs; print the "
             "time and each output's error.", "set -euo pipefail", 'cd "$(dirname "$0")"']
    args = " ".join(f"--input=@input_{i}.npy" for i in range(inputs))
    for side, session in sessions.items():
        runtime = session.runtime(target.arch)
        if target.arch == RISCV64:  # no registry ships one: the folder carries each side's own
            local = directory / "bin" / f"iree-run-module-riscv64-{side}"
            local.parent.mkdir(exist_ok=True)
            shutil.copyfile(runtime.executable, local)
            local.chmod(0o755)
            exe = f"bin/{local.name}"
        else:
            exe = shlex.quote(str(runtime.executable))
        var = f"IREE_RUN_MODULE_{side.upper().replace('-', '_')}"
        lines.append(f": \"${{{var}:={exe}}}\"")
        prefix = ""
        if target.arch != HOST:
            qemu = session.qemu(target.arch)
            sysroot = f" -L {shlex.quote(str(runtime.sysroot))}" if runtime.sysroot else ""
            lines.append(f": \"${{QEMU:={shlex.quote(str(qemu.path))}}}\"  # QEMU >= 9; vlen must match the target")
            prefix = f"\"$QEMU\" -cpu {target.emulator_cpu} -R {GUEST_ADDRESS_SPACE}{sysroot} "
        outs = " ".join(f"--output=@{side}/output_{i}.npy" for i in range(outputs))
        lines += [f"echo '== {side}'",
                  f"time {prefix}\"${var}\" --device=local-sync --module={side}/module.vmfb "
                  f"--function={functions[side]} {args} {outs} --print_statistics"]
    lines.append(f"python3 check.py {' '.join(SIDES)}")
    return lines


def _check(tolerance: Tolerance, steps: tuple[float | None, ...]) -> str:
    """check.py with the model's tolerance and its outputs' quantization steps written in."""
    values = (float(tolerance.atol), float(tolerance.rtol), float(tolerance.steps))
    return (_CHECK.replace("@TOLERANCE@", repr(values)).replace("@DESCRIBED@", tolerance.describe())
            .replace("@OUTPUT_STEPS@", repr([None if s is None else float(s) for s in steps])))


def _script(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)


def _readme(comparison: ToolchainComparison, target: Target, tolerance: Tolerance) -> str:
    top = comparison.changes[0] if comparison.changes else None
    diff = ""
    if top is not None:
        index = [key.split("_")[1] for key in (top.before_key, top.after_key)]
        diff = (f"# the dispatch that added the most work, {top.name}: its assembly, then its source\n"
                f"diff -u <(bash dispatch.sh reference {top.before_key}) <(bash dispatch.sh under-test {top.after_key})"
                f"\ndiff -u reference/sources/*_dispatch_{index[0]}.mlir "
                f"under-test/sources/*_dispatch_{index[1]}.mlir\n")
    return f"""# {comparison.model} on {target.name}: under test vs reference

Written by pytest-rvv's toolchain comparison. What it found:

```
{comparison.render(asm_lines=60)}
```

## Show the difference

```sh
bash compile.sh   # both compilers: <side>/module.vmfb, <side>/sources/*.mlir, <side>/intermediates/*.s
bash run.sh       # both modules on the seeded inputs: time, IREE's peak memory, error vs onnxruntime
{diff}```

`compile.sh` and `run.sh` name the compilers, runtime and QEMU they use in variables at the top
(`IREE_COMPILE_REFERENCE`, `IREE_COMPILE_UNDER_TEST`, `IREE_RUN_MODULE_*`, `QEMU`): set them to run
on another machine. Inputs: `input_*.npy` (seeded), onnxruntime's outputs: `expected_*.npy`,
the prepared model: `model.onnx`, each toolchain's import of it: `<side>.mlir`, versions:
`versions.txt`; `asm.diff`: the disassembly diff pytest-rvv showed, in full. Executed instruction
counts come from pytest-rvv's QEMU plugin; under plain QEMU, `run.sh` shows the time. `run.sh` ends
with `python3 check.py`, which needs only Python's standard library (no numpy) and exits 1 when an
output disagrees with onnxruntime beyond the model's tolerance ({tolerance.describe()}).
"""
