"""A second IREE toolchain named by one SPEC (``--rvv-compare``): a pip requirement, a wheel, or a build.

- an IREE build or install directory: its tools, as ``--rvv-iree-build`` finds them;
- a wheel file (``iree_base_compiler-3.12.0-...whl``) or a pip requirement
  (``iree-base-compiler==3.12.0``, ``iree-base-compiler<3.13``): installed once with pip into its
  own directory in the tools cache, keyed by what pip resolved (with the matching
  ``iree-base-runtime`` for host and aarch64 runs), and reused by every later session and worker.

The environment is a ``pip install --target`` directory, built beside its final place and
renamed into it under a file lock, so a half-installed environment is never used. Its importer
runs with this interpreter (which has onnx) and the environment first on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock
from packaging.requirements import InvalidRequirement, Requirement

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.base.store import digest, file_sha256
from pytest_rvv.toolchain.toolchain import Toolchain, compiler_version_line, find_toolchain

COMPILER = "iree-base-compiler"
RUNTIME = "iree-base-runtime"
ENVS = "iree-envs"
DONE = "pytest-rvv-env.json"
PIP_TIMEOUT_S = 1800
_IMPORTER = """#!/bin/sh
# iree-import-onnx of this environment, run by the interpreter that made it (it has onnx)
here=$(cd "$(dirname "$0")" && pwd)
PYTHONPATH="$here/site${{PYTHONPATH:+:$PYTHONPATH}}" exec "{python}" -m iree.compiler.tools.import_onnx "$@"
"""


@dataclass(frozen=True)
class Resolved:
    """What pip resolved a SPEC to: the requirements to install and the release."""

    requirements: tuple[str, ...]
    release: str
    label: str  # e.g. "iree-base-compiler==3.12.0"


def toolchain_from_spec(spec: str, tools_dir: Path, option: str = "--rvv-compare",
                        pip_args: tuple[str, ...] = ()) -> Toolchain:
    """The toolchain SPEC names (see the module docstring); one ConfigError line when it cannot be had."""
    spec = spec.strip()
    if not spec:
        raise ConfigError(f"{option}: give a pip requirement (iree-base-compiler==3.12.0), a wheel file or an "
                          "IREE build directory")
    path = Path(spec).expanduser()
    if path.is_dir():
        try:
            return find_toolchain(path.resolve(), option)
        except Exception as exc:
            raise ConfigError(str(exc)) from None
    resolved = _resolve(spec, path, option, pip_args)
    env = _install(resolved, tools_dir / ENVS, spec, option, pip_args)
    site = env / "site"
    compiler = site / "iree" / "compiler" / "_mlir_libs" / "iree-compile"
    if not compiler.is_file():
        raise ConfigError(f"{option} {spec}: {resolved.label} has no iree/compiler/_mlir_libs/iree-compile; "
                          f"name an {COMPILER} release")
    host_run = site / "iree" / "_runtime_libs" / "iree-run-module"
    return Toolchain(compiler, env / "iree-import-onnx", compiler_version_line(compiler),
                     host_run_module=host_run if host_run.is_file() else None,
                     described=f"{resolved.label} (environment {env})", package_release=resolved.release)


def environment_of(toolchain: Toolchain) -> Path:
    """The environment directory holding ``toolchain`` (usable as an IREE build directory)."""
    return toolchain.iree_import_onnx.parent


def released_versions(package: str = COMPILER, pip_args: tuple[str, ...] = ()) -> list[str]:
    """Every release of ``package`` pip can see (``pip index versions``), newest first."""
    proc = _pip(["index", "versions", package], package, "pip index versions", pip_args)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("Available versions:")), "")
    return [v.strip() for v in line.removeprefix("Available versions:").split(",") if v.strip()]


def _resolve(spec: str, path: Path, option: str, pip_args: tuple[str, ...]) -> Resolved:
    if spec.endswith(".whl"):
        if not path.is_file():
            raise ConfigError(f"{option} {spec}: no such wheel file")
        release = path.name.split("-")[1] if path.name.count("-") >= 2 else "unknown"
        runtime = (f"{RUNTIME}=={release}",) if path.name.startswith("iree_base_compiler-") else ()
        return Resolved((str(path.resolve()), *runtime), release,
                        f"{path.name} (sha256:{file_sha256(path)[:12]})")
    try:
        requirement = Requirement(spec)
    except InvalidRequirement as exc:
        reason = str(exc).splitlines()[0]
        raise ConfigError(f"{option} {spec!r}: not a directory, a wheel or a pip requirement ({reason})") from None
    name = requirement.name.lower().replace("_", "-")
    pins = [s.version for s in requirement.specifier if s.operator == "=="]
    release = pins[0] if len(pins) == 1 and "*" not in pins[0] else _pip_resolves(spec, option, pip_args)
    if name != COMPILER:
        return Resolved((f"{requirement.name}=={release}",), release, f"{requirement.name}=={release}")
    return Resolved((f"{COMPILER}=={release}", f"{RUNTIME}=={release}"), release, f"{COMPILER}=={release}")


def _pip(args: list[str], spec: str, option: str, pip_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pip", *args, *pip_args, "--disable-pip-version-check"]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{option} {spec}: pip timed out after {PIP_TIMEOUT_S}s; check access to the "
                          "package index") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip().startswith("ERROR")] \
            or proc.stderr.strip().splitlines()[-1:] or ["no output"]
        raise ConfigError(f"{option} {spec}: pip cannot install it: {lines[-1]}")
    return proc


def _pip_resolves(spec: str, option: str, pip_args: tuple[str, ...]) -> str:
    """The version pip would install for ``spec`` (``pip install --dry-run --report``)."""
    proc = _pip(["install", "--only-binary", ":all:", "--dry-run", "--no-deps", "--quiet", "--ignore-installed",
                 "--report", "-", spec],
                spec, option, pip_args)
    try:
        installs = json.loads(proc.stdout)["install"]
        return str(installs[0]["metadata"]["version"])
    except (ValueError, KeyError, IndexError):
        raise ConfigError(f"{option} {spec}: pip resolved nothing to install") from None


def _install(resolved: Resolved, envs: Path, spec: str, option: str, pip_args: tuple[str, ...]) -> Path:
    """The environment directory for ``resolved``, installed once (under a lock, renamed into place)."""
    key = digest(["iree-env-v1", *resolved.requirements, f"{sys.version_info.major}.{sys.version_info.minor}"])[:24]
    env = envs / key
    if (env / DONE).is_file():
        return env
    envs.mkdir(parents=True, exist_ok=True)
    with FileLock(str(envs / f"{key}.lock"), timeout=PIP_TIMEOUT_S):
        if (env / DONE).is_file():
            return env
        shutil.rmtree(env, ignore_errors=True)  # a half-built one from a killed session
        tmp = envs / f".{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            _pip(["install", "--only-binary", ":all:", "--no-deps", "--quiet", "--target", str(tmp / "site"),
                  *resolved.requirements],
                 spec, option, pip_args)
            (tmp / "iree-import-onnx").write_text(_IMPORTER.format(python=sys.executable))
            (tmp / "iree-import-onnx").chmod(0o755)
            (tmp / DONE).write_text(json.dumps({"spec": spec, "requirements": resolved.requirements,
                                                "release": resolved.release}, indent=1))
            os.rename(tmp, env)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return env
