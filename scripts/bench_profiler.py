#!/usr/bin/env python3
"""Overhead of the rvv_counter plugin: emulated run time with and without it, per model.

    .venv/bin/python scripts/bench_profiler.py [--target aarch64] [--models a,b] [--repeat 3]

Prints, per model, the minimum wall time of N plain runs, of N counted runs (inline counters
only), and of N counted runs with elements=on (register reads per vector instruction), with the
ratios. Targets other than aarch64 need their runtime (e.g. --rvv-runtime-riscv64 in pyproject
or PYTEST_RVV_RUNTIME_RISCV64).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from pytest_rvv.config.settings import Settings
from pytest_rvv.run.qemu_plugin import build_plugin, check_plugin_support, plugin_option
from pytest_rvv.session import RvvSession


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="aarch64")
    parser.add_argument("--models", default="")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    settings = Settings.resolve(lambda o: (args.models, Path.cwd()) if o.name == "models" and args.models else None,
                                {}, Path.cwd())
    session = RvvSession(settings)
    target = settings.known_targets[args.target]
    runner = session.runner(target)
    assert runner.qemu is not None, "the plugin only runs under QEMU"
    check_plugin_support(runner.qemu)
    plugin = build_plugin(session.store)
    print(f"target {target.name}, {runner.qemu.path} {runner.qemu.version_text}, min of {args.repeat} runs")
    print(f"{'model':18} {'plain s':>8} {'counted s':>10} {'ratio':>6} {'+elements s':>12} {'ratio':>6}")
    for model in settings.models:
        artifact = session.artifact(model, target)
        reference = session.reference(model)
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            times = {}
            for name, qemu_args in (("plain", ()), ("counted", plugin_option(plugin, work / "c.txt", False)),
                                    ("elements", plugin_option(plugin, work / "e.txt", True))):
                runs = [runner.run(artifact, reference.inputs, work, len(reference.outputs), 600, qemu_args=qemu_args)
                        for _ in range(args.repeat)]
                times[name] = min(r.process.wall_s for r in runs)
            plain, counted, elements = times["plain"], times["counted"], times["elements"]
        print(f"{model.name:18} {plain:8.2f} {counted:10.2f} {counted / plain:6.2f} {elements:12.2f} "
              f"{elements / plain:6.2f}", flush=True)


if __name__ == "__main__":
    main()
