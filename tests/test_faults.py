"""Faults a user meets, each one line, and a rerun that passes without cleanup by hand.

Each test runs the real correctness suite on a small model through the real tools. Full and read-only
filesystems are real tmpfs mounts in a private mount namespace (``unshare -m``; ``unshare -rm`` maps a
non-root user to root inside it), so nothing is left mounted and no LD_PRELOAD is involved.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import USER_TOOLS, mlp_model

MLP = 'path = "mlp.onnx"\ninputs = [{ name = "x", shape = [4, 64], generator = "normal", low = 0, high = 1 }]\n'
SUITE = Path(__file__).resolve().parent.parent / "suites" / "correctness"
FULL = "no space left on device; free space there or give another --rvv-cache-dir"
TRACEBACK_MARKS = ("Traceback", "OSError", "Errno")


def make_project(path: Path) -> Path:
    """A folder with the mlp model as a user model and a copy of the correctness suite."""
    path.mkdir(parents=True, exist_ok=True)
    mlp_model(path / "mlp.onnx")
    (path / "pyproject.toml").write_text(f"[tool.pytest_rvv.models.mlp]\n{MLP}")
    (path / "correctness").mkdir(exist_ok=True)
    for test in SUITE.glob("*.py"):
        (path / "correctness" / test.name).write_text(test.read_text())
    return path


def pytest_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "correctness", "--rvv-models=mlp", *args]


def environment(cache: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    env["PYTEST_RVV_TOOLS_DIR"] = str(USER_TOOLS)
    env.pop("PYTEST_ADDOPTS", None)
    if cache is not None:
        env["PYTEST_RVV_CACHE_DIR"] = str(cache)
    return env


def in_namespace(script: str, cwd: Path, env: dict[str, str],
                 remount: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a bash ``script`` in a private mount namespace (root in it), where it may mount (and ``remount``) tmpfs."""
    unshare = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-r", "-m"]
    try:  # can this user mount a tmpfs in a namespace of its own? (root can; a user only where the kernel lets it)
        where = shlex.quote(str(cwd))
        again = f" && mount -o remount,size=128k {where}" if remount else ""
        probe = subprocess.run([*unshare, "bash", "-c", f"mount -t tmpfs -o size=64k tmpfs {where}{again}"],
                               capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("no unshare(1) here: cannot mount a private tmpfs to fill or make read-only")
    if probe.returncode != 0:
        pytest.skip(f"cannot mount{' and remount' if remount else ''} a private tmpfs here as "
                    f"{'root' if os.geteuid() == 0 else 'this user'} "
                    f"({' '.join(probe.stderr.split())[:120]})")
    return subprocess.run([*unshare, "bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def logged(argv: str, name: str) -> str:
    """A script line that runs ``argv`` into ``name.log``, ending the log with ``rc=N`` when it fails."""
    return f"{argv} > {name}.log 2>&1 || echo \"rc=$?\" >> {name}.log\n"


def logs(folder: Path, *names: str) -> list[str]:
    return [(folder / f"{name}.log").read_text() for name in names]


def storage_lines(output: str) -> list[str]:
    """The fault lines: each test's own and the summary's (not pytest's truncated short summary)."""
    return [line for line in output.splitlines()
            if line.startswith(("StorageFault: ", "rvv: /")) and not line.startswith(("FAILED", "ERROR"))]


def cache_on_tmpfs(tmp_path: Path, target: str, *steps: str) -> tuple[Path, Path, list[str]]:
    """Run ``steps`` in a private mount namespace with the project's cache folder: a step ``run NAME`` runs the
    suite on ``target`` into NAME.log, any other step is a shell line where {cache} is the cache folder. The logs,
    in order."""
    project = make_project(tmp_path / "project")
    cache = tmp_path / "cache"
    cache.mkdir()
    argv = shlex.join(pytest_argv(f"--rvv-targets={target}", "-q"))
    runs = [step[4:] for step in steps if step.startswith("run ")]
    script = "".join(logged(argv, step[4:]) if step.startswith("run ") else step.format(cache=cache) + "\n"
                     for step in steps)
    result = in_namespace(script, project, environment(cache))
    assert result.returncode == 0, result.stderr
    return project, cache, logs(project, *runs)


def test_a_full_cache_is_one_line_per_test_and_a_rerun_with_space_passes(tmp_path):
    project, cache, (full, rerun) = cache_on_tmpfs(
        tmp_path, "rv64gcv-zvl256b", "mount -t tmpfs -o size=128k tmpfs {cache}", "run full",
        "find {cache} -name '*.build' > leftovers.log", "mount -o remount,size=64m {cache}", "run rerun")
    lines = storage_lines(full)
    # each test errors with the one line; the summary says it once, with the count
    assert lines, full
    assert all(FULL in line and str(cache) in line and "--rvv-cache-dir" in line for line in lines), full
    summary = [line for line in lines if line.startswith("rvv: ")]
    assert len(summary) == 1 and "stopped by it" in summary[0], full
    assert not any(mark in full for mark in TRACEBACK_MARKS), full
    assert (project / "leftovers.log").read_text() == "", "a half-written entry stayed in the store"
    assert "rc=" not in rerun and " passed" in rerun and "StorageFault" not in rerun, rerun


def test_a_read_only_cache_is_one_line_and_still_serves_what_it_holds(tmp_path):
    _, cache, (empty, warm, warm_ro) = cache_on_tmpfs(
        tmp_path, "rv64gc", "mount -t tmpfs -o ro,size=16m tmpfs {cache}", "run empty",
        "mount -o remount,rw {cache}", "run warm", "mount -o remount,ro {cache}", "run warm-ro")
    notice = [line for line in empty.splitlines() if line.startswith(f"rvv: {cache}: read-only file system")]
    assert len(notice) == 1 and "--rvv-cache-dir" in notice[0] and "2 tests stopped by it" in notice[0], empty
    assert "rc=1" in empty and not any(mark in empty for mark in TRACEBACK_MARKS), empty
    assert all("read-only file system" in line for line in storage_lines(empty)), empty
    assert "rc=" not in warm and "2 passed" in warm, warm
    assert "rc=" not in warm_ro and "2 passed" in warm_ro, warm_ro
    said = [line for line in warm_ro.splitlines() if "read-only file system" in line]
    assert len(said) == 1 and "still used" in said[0], warm_ro  # said once, as a notice


def test_kill_9_in_the_middle_of_a_cold_run_then_a_rerun_passes(tmp_path):
    project = make_project(tmp_path / "project")
    cache = tmp_path / "cache"
    env = environment(cache)
    argv = pytest_argv("--rvv-targets=rv64gc,rv64gcv-zvl256b", "-q")
    run = subprocess.Popen(argv, cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(cache.glob("compile/*/.*.build")):
        time.sleep(0.05)  # kill it while iree-compile writes into a build folder
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    assert list(cache.glob("compile/*/.*.build")), "the run ended before it compiled: nothing was interrupted"
    rerun = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    assert "4 passed" in rerun.stdout
    assert not list(cache.glob("compile/*/.*.build")), "the killed run's build folder was not cleaned up"


def test_two_sessions_at_once_on_one_empty_cache_both_pass(tmp_path):
    cache = tmp_path / "cache"
    env = environment(cache)
    runs = [subprocess.Popen(pytest_argv("--rvv-targets=rv64gc,rv64gcv-zvl256b", "-q"),
                             cwd=make_project(tmp_path / f"project{i}"), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True) for i in range(2)]
    outputs = [run.communicate(timeout=600)[0] for run in runs]
    for run, output in zip(runs, outputs, strict=True):
        assert run.returncode == 0, output[-3000:]
        assert "4 passed" in output


def test_corrupted_store_records_are_rebuilt_and_the_rerun_passes(tmp_path):
    project = make_project(tmp_path / "project")
    cache = tmp_path / "cache"
    env = environment(cache)
    argv = pytest_argv("--rvv-targets=rv64gcv-zvl256b", "-q")
    first = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-3000:]
    modules = list(cache.glob("compile/*/*/module.vmfb"))
    manifests = list(cache.glob("imports/*/*/manifest.json"))
    outputs = list(cache.glob("*/*/*/output_0.npy"))
    assert modules and manifests and outputs
    for module in modules:
        module.write_bytes(module.read_bytes()[: module.stat().st_size // 2])  # truncated
    for manifest in manifests:
        manifest.write_text("{ not json")
    for output in outputs:
        data = bytearray(output.read_bytes())
        data[-1] ^= 0xFF  # one flipped byte in a recorded output
        output.write_bytes(bytes(data))
    rerun = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    assert "2 passed" in rerun.stdout and "Traceback" not in rerun.stdout


def test_no_network_is_quiet_when_a_cached_runtime_loads(tmp_path):
    project = make_project(tmp_path / "project")
    env = environment()
    env.pop("PYTEST_RVV_IREE_SRC", None)
    env["PYTEST_RVV_IREE_GIT"] = str(tmp_path / "no-git-host")  # every clone fails, as offline
    result = subprocess.run(pytest_argv("--rvv-targets=rv64gcv-zvl256b"), cwd=project, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    header = [line for line in result.stdout.splitlines() if line.startswith("rvv:")]
    assert not [line for line in header if "clone" in line or "no source" in line], header
    assert any(line.startswith("rvv: riscv64 runtime ") and ("nearest that loads" in line or "own commit" in line)
               for line in header), header


def test_an_unwritable_report_folder_and_a_comparison_nobody_selected_are_one_line_each_under_q(tmp_path):
    project = make_project(tmp_path / "project")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = subprocess.run(pytest_argv("--rvv-targets=host", "-q", f"--rvv-report={blocker}/report",
                                        "--rvv-compare=iree-base-compiler==3.12.0"),
                            cwd=project, env=environment(), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:]
    lines = result.stdout.splitlines()
    report = [line for line in lines if line.startswith(f"rvv: --rvv-report: {blocker}/report: ")]
    assert len(report) == 1 and "no report is written" in report[0], lines
    compare = [line for line in lines if line.startswith("rvv: --rvv-compare=iree-base-compiler==3.12.0: ")]
    assert len(compare) == 1 and "nothing was compared" in compare[0], lines
    assert not (blocker.parent / "report").exists()


def test_a_report_folder_that_fills_up_at_the_end_is_one_line_and_a_failed_run(tmp_path):
    project = make_project(tmp_path / "project")
    report = tmp_path / "report"
    report.mkdir()
    argv = shlex.join(pytest_argv("--rvv-targets=host", "-q", f"--rvv-report={report}"))
    result = in_namespace(
        f"mount -t tmpfs -o size=8k tmpfs {report}\n"  # room for the start-up check, not for the page
        + logged(argv, "small") + f"find {report} -name '.*.tmp' > leftovers.log\n",
        project, environment(), remount=False)
    assert result.returncode == 0, result.stderr
    (small,) = logs(project, "small")
    assert "rc=1" in small and "INTERNALERROR" not in small and "Traceback" not in small, small
    said = [line for line in small.splitlines() if line.startswith(f"rvv: {report}: no space left on device")]
    assert len(said) == 1 and "incomplete" in said[0], small
    assert (project / "leftovers.log").read_text() == "", "a half-written report file stayed"
