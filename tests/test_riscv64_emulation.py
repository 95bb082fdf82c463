"""The riscv64 runner under real qemu-riscv64, with a tiny RVV program built by Debian's cross gcc.

No riscv64 IREE runtime exists in any registry, so these tests exercise exactly the parts that do
not need one: the emulator command line of every riscv64 target (VLEN really paired with
+zvlNb), the sysroot (-L) path of a dynamically linked runtime, and naming SIGILL when vector
code runs on the scalar target.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_rvv.base.errors import RunFailed
from pytest_rvv.base.process import run_process
from pytest_rvv.compile.compiler import Artifact
from pytest_rvv.config.targets import BUILTIN_TARGETS, RISCV64
from pytest_rvv.run.qemu import find_qemu
from pytest_rvv.run.runner import Runner
from pytest_rvv.toolchain.runtimes import Runtime

CROSS_GCC = "riscv64-linux-gnu-gcc"
SYSROOT = Path("/usr/riscv64-linux-gnu")
PROGRAM = r"""
#include <stdio.h>
int main(void) {
    unsigned long vlenb;
    __asm__ volatile("csrr %0, vlenb" : "=r"(vlenb));  /* SIGILL without the V extension */
    printf("vlen=%lu\n", vlenb * 8);
    return 0;
}
"""

pytestmark = pytest.mark.skipif(shutil.which(CROSS_GCC) is None or not SYSROOT.is_dir(),
                                reason=f"{CROSS_GCC} not installed: apt-get install gcc-riscv64-linux-gnu "
                                       "libc6-dev-riscv64-cross (bash scripts/setup.sh system)")


@pytest.fixture(scope="module")
def vlen_program(tmp_path_factory) -> Runtime:
    """A dynamically linked riscv64 program standing where iree-run-module would, with its sysroot."""
    folder = tmp_path_factory.mktemp("rv")
    (folder / "vlen.c").write_text(PROGRAM)
    subprocess.run([CROSS_GCC, "-O1", "-march=rv64gcv", "-mabi=lp64d", "-o", folder / "vlen", folder / "vlen.c"],
                   check=True)
    return Runtime(RISCV64, folder / "vlen", SYSROOT, "test program")


@pytest.mark.parametrize("vlen", [128, 256, 512])
def test_each_rvv_target_runs_with_the_vlen_it_was_compiled_for(vlen_program, vlen):
    runner = Runner(BUILTIN_TARGETS[f"rv64gcv-zvl{vlen}b"], vlen_program, find_qemu(RISCV64))
    result = run_process([*runner.prefix(), str(vlen_program.executable)], timeout_s=60)
    assert result.ok, result.stderr
    assert result.stdout == f"vlen={vlen}\n"


def test_vector_code_on_the_scalar_target_is_reported_as_sigill(vlen_program, tmp_path):
    target = BUILTIN_TARGETS["rv64gc"]
    runner = Runner(target, vlen_program, find_qemu(RISCV64))
    module = tmp_path / "module.vmfb"
    module.write_bytes(b"")  # the program ignores its arguments
    artifact = Artifact("vlen-probe", target, module, "main", "key", (), "", 0.0, reused=False)
    with pytest.raises(RunFailed) as failure:
        runner.run(artifact, [], tmp_path, 1, timeout_s=60)
    assert str(failure.value) == (
        f"iree-run-module killed by SIGILL running vlen-probe for rv64gc under qemu-riscv64 "
        f"{runner.qemu.version_text} -cpu rv64,v=false: an instruction the emulated CPU lacks "
        "(vector code on a scalar target, or vlen too small?)"
    )
    assert (f"repro: cd {tmp_path} && env -i {runner.qemu.path} -cpu rv64,v=false -R 0x200000000 -L {SYSROOT} "
            "-0 iree-run-module iree-run-module --device=local-sync --module=module.vmfb") in failure.value.details
