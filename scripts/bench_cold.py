#!/usr/bin/env python3
"""The cold default run, measured: wall, CPU and where the time went, with an empty cache.

    .venv/bin/python scripts/bench_cold.py [--cpus 0] [--keep DIR] [-- PYTEST ARGS]

Runs ``pytest suites/ -n auto --rvv-profile`` (or the pytest arguments given after ``--``) with an empty
``PYTEST_RVV_CACHE_DIR`` (QEMU and the riscv64 runtimes stay where setup built them), then a rerun on the cache it
filled, and prints both runs' wall and CPU, the profile's stage table, its heaviest cells and idle line, and a row for
docs/ci.md's table (machine, commit). ``--cpus 0`` runs under ``taskset -c 0`` to stand in for a machine with half
the cores. A benchmark, not a test: it prints figures and fails only when pytest fails.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_rvv.config.settings import default_tools_dir

ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str], env: dict[str, str]) -> tuple[int, float, float, list[str]]:
    """(exit code, wall s, CPU s of the run and its children, output lines), the output echoed as it comes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    lines: list[str] = []
    with subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            lines.append(line.rstrip("\n"))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc.returncode, wall, cpu, lines


def _profile(lines: list[str]) -> list[str]:
    start = next((i for i, line in enumerate(lines) if "rvv profile: where the time went" in line), None)
    if start is None:
        return []
    return [line for line in lines[start + 1:] if line and not line.startswith("=")][:30]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpus", default="", help="taskset CPU list to run on (e.g. 0: one core)")
    parser.add_argument("--keep", type=Path, help="use and keep this (empty) cache folder")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments (default: suites/ -n auto)")
    args = parser.parse_args()
    cache = args.keep or Path(tempfile.mkdtemp(prefix="pytest-rvv-cold-"))
    if cache.exists() and any(cache.iterdir()):
        parser.error(f"--keep {cache}: not empty; give an empty or new folder (the run must start cold)")
    cache.mkdir(parents=True, exist_ok=True)
    env = os.environ | {"PYTEST_RVV_CACHE_DIR": str(cache), "PYTEST_RVV_TOOLS_DIR": str(default_tools_dir())}
    argv = [sys.executable, "-m", "pytest", *(args.pytest_args or ["suites/", "-n", "auto"]), "--rvv-profile",
            "-p", "no:cacheprovider"]
    if args.cpus:
        argv = ["taskset", "-c", args.cpus, *argv]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip() or "?"
    try:
        rc, wall, cpu, lines = _run(argv, env)
        rerun_rc, rerun_wall, rerun_cpu, rerun_lines = _run(argv, env)
    finally:
        if args.keep is None:
            shutil.rmtree(cache, ignore_errors=True)
    named = next((m.group(1) for line in lines if (m := re.match(r"rvv: machine (\S+)", line))), "?")
    emulated = next((line for line in rerun_lines if line.startswith("rvv: emulated runs:")), "rvv: emulated runs: -")
    print("\n--- bench_cold ---")
    print(f"machine {named} ({os.cpu_count()} cores{', taskset -c ' + args.cpus if args.cpus else ''}), "
          f"commit {commit}: {' '.join(argv[argv.index('-m') + 2:])}")
    print(f"cold:  rc {rc}, wall {wall / 60:.1f} min, CPU {cpu:.0f} s ({100 * cpu / wall:.0f} % of one core)")
    print(f"rerun: rc {rerun_rc}, wall {rerun_wall:.1f} s, CPU {rerun_cpu:.0f} s; {emulated[len('rvv: '):]}")
    for line in _profile(lines):
        print(f"  {line}")
    print(f"| {named} | {commit} | {wall / 60:.1f} min | {cpu:.0f} s | {rerun_wall:.0f} s |")
    return rc or rerun_rc


if __name__ == "__main__":
    sys.exit(main())
