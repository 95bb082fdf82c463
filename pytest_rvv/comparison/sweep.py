"""``pytest-rvv sweep --versions 3.9.0..3.13.0 -- PYTEST-ARGS``: a pytest selection run with each released
compiler, its results kept per version (cached), so the report draws each metric across releases.

Each release is installed once into the tools cache (toolchain/environments.py) and run with
``PYTEST_RVV_IREE_BUILD`` set to it and ``--rvv-report=<out>/<version>``; a version whose results
exist for the same arguments is not run again. Test failures are data here, not an error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.comparison.bisect import run_selection, versions_between
from pytest_rvv.toolchain.environments import COMPILER, environment_of, released_versions, toolchain_from_spec


def parse_range(text: str) -> tuple[str, str]:
    """``3.9.0..3.13.0`` -> ("3.9.0", "3.13.0"); one ConfigError line otherwise."""
    first, sep, last = text.partition("..")
    if not sep or not first or not last:
        raise ConfigError(f"--versions {text!r}: give a range of releases, e.g. 3.9.0..3.13.0")
    return first.strip(), last.strip()


def sweep(versions: str, pytest_args: Sequence[str], out: Path, tools_dir: Path, cwd: Path,
          pip_args: tuple[str, ...] = (), log: Callable[[str], None] = print) -> int:
    """Run the selection with every release in the range; 0 when each ran (or was cached), 1 when one could not."""
    first, last = parse_range(versions)
    releases = versions_between(released_versions(COMPILER, pip_args), first, last)
    missing: list[str] = []
    for index, version in enumerate(releases, 1):
        log(f"step {index} of {len(releases)}: {version}")  # the caller's Progress adds the time so far
        folder = out / version
        marker = folder / "sweep.json"
        if (folder / "results.json").is_file() and marker.is_file() and \
                json.loads(marker.read_text()).get("args") == list(pytest_args):
            log(f"{version}: cached ({folder / 'results.json'})")
            continue
        try:
            toolchain = toolchain_from_spec(f"{COMPILER}=={version}", tools_dir, "sweep", pip_args)
        except ConfigError as exc:
            log(f"{version}: skipped, cannot be installed: {exc}")
            missing.append(version)
            continue
        code, summary = run_selection(environment_of(toolchain), [*pytest_args, f"--rvv-report={folder}"], cwd)
        if not (folder / "results.json").is_file():
            log(f"{version}: pytest exited {code} without results ({summary})")
            missing.append(version)
            continue
        marker.write_text(json.dumps({"args": list(pytest_args), "compiler": toolchain.compiler_version}))
        log(f"{version}: {summary}")
    log(f"{len(releases) - len(missing)} of {len(releases)} releases in {out}; the report draws them with "
        f"--rvv-history={out}" + (f"; missing: {', '.join(missing)}" if missing else ""))
    return 1 if missing else 0
