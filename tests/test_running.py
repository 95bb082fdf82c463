"""Running modules: timeouts kill the emulator's process group, signals are named, repro lines."""

import os
import sys
from pathlib import Path

from pytest_rvv.base.process import run_process


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                cwd = os.readlink(proc / "cwd")  # emulated runs work inside their run folder
            except OSError:
                continue
            if (text in cmdline or cwd.startswith(text)) and "pytest" not in cmdline:
                found.append(cmdline)
    return found


def test_emulated_run_past_the_timeout_is_killed_with_a_repro_line(project):
    project.write(models=("slow",))
    result = project.run("correctness/test_agreement.py", "--rvv-models=slow", "--rvv-targets=aarch64",
                         "--rvv-timeout=0.5")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "RunFailed: iree-run-module timed out after 0.5s running slow for aarch64 under qemu-aarch64 *"
        " -cpu max (raise --rvv-timeout if the model is just slow)",
        "repro: cd * && env -i */qemu-aarch64 -cpu max -R 0x200000000 -L /usr/aarch64-linux-gnu -0 iree-run-module "
        "iree-run-module --device=local-sync --module=module.vmfb --function=slow --input=@input_0.npy "
        "--output=@output_0.npy --print_statistics",
    ])
    assert _processes_mentioning(str(project.path)) == [], "the emulator outlived its timeout"


def test_timeout_kills_grandchildren_too(tmp_path):
    marker = tmp_path / "grandchild-ran"
    result = run_process(["sh", "-c", f"(sleep 3; touch {marker}) & sleep 30"], timeout_s=0.3)
    assert result.timed_out and result.status() == "timed out after 0.3s"
    assert _processes_mentioning(str(marker)) == []


def test_exit_signal_is_named():
    result = run_process(["sh", "-c", "echo about to die >&2; kill -ILL $$"], timeout_s=10)
    assert result.signal_name == "SIGILL"
    assert result.status() == "killed by SIGILL"
    assert result.stderr == "about to die\n"


def test_exit_code_and_output_tails_are_kept():
    result = run_process([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], timeout_s=30)
    assert (result.returncode, result.status(), result.stdout) == (3, "exit code 3", "out\n")
    assert result.cpu_s > 0
