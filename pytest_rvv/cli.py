"""The ``pytest-rvv`` command: ``doctor``, ``models`` and ``build-runtime``."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from pytest_rvv.errors import RvvError
from pytest_rvv.run.runtime_build import SOURCE_ENV
from pytest_rvv.settings import OPTIONS, Option, Settings, read_pyproject_table


def find_pyproject(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        if (directory / "pyproject.toml").is_file():
            return directory / "pyproject.toml"
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pytest-rvv", description="pytest-rvv tools")
    commands = parser.add_subparsers(dest="command", required=True)
    doctor = commands.add_parser("doctor", help="check every tool pytest-rvv needs and say how to fix what is missing")
    models = commands.add_parser("models", help="list every model: source, size preset, inputs, operators")
    build = commands.add_parser(
        "build-runtime", help="build IREE's runtime for riscv64 from IREE's source into the tools cache "
                              f"(source: --source, ${SOURCE_ENV}, or a git clone at the compiler's commit)")
    build.add_argument("--source", metavar="DIR|TARBALL", help=f"IREE source tree or .tar.xz (default ${SOURCE_ENV})")
    build.add_argument("--tools-dir", metavar="DIR", type=Path, help="default $PYTEST_RVV_TOOLS_DIR or "
                       "~/.cache/pytest-rvv/tools")
    for sub in (doctor, models, build):
        for option in OPTIONS:
            sub.add_argument(option.flag, dest=option.dest, metavar=option.metavar, help=option.help)
    return parser


def build_runtime_command(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when the runtime is built or already there, 3 when no source can be had, 1 when the build fails."""
    from pytest_rvv.compile.toolchain import find_toolchain
    from pytest_rvv.run.qemu import default_tools_dir
    from pytest_rvv.run.runtime_build import BuildFailed, SourceNotFound, build_runtime, commit_mismatch, find_source

    tools_dir = args.tools_dir or default_tools_dir()
    toolchain = find_toolchain(settings.iree_build)

    def log(line: str) -> None:
        print(f"[build-runtime] {line}", flush=True)

    with tempfile.TemporaryDirectory(prefix="pytest-rvv-iree-src-") as scratch:
        try:
            source = find_source(toolchain.compiler_version, args.source, Path(scratch))
            built, created = build_runtime(source, tools_dir, log=log)
        except SourceNotFound as exc:
            print(f"pytest-rvv build-runtime: {exc}", file=sys.stderr)
            return 3
        except BuildFailed as exc:
            print(f"pytest-rvv build-runtime: {exc}\n{exc.details}", file=sys.stderr)
            return 1
    log(("built " if created else "already built: ") + built.describe())
    if mismatch := commit_mismatch(built.commit, toolchain.commit):
        log(f"note: {mismatch} ({toolchain.compiler_version}); pytest-rvv's probe module decides whether it "
            "loads its modules")
    return 0


def load_settings(args: argparse.Namespace) -> Settings:
    pyproject = find_pyproject(Path.cwd())
    root = pyproject.parent if pyproject else Path.cwd()

    def lookup(option: Option) -> tuple[Any, Path] | None:
        value = getattr(args, option.dest, None)
        return (value, Path.cwd()) if value else None

    return Settings.resolve(lookup, read_pyproject_table(pyproject), root)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings(args)
        if args.command == "doctor":
            from pytest_rvv.doctor import run_doctor

            return run_doctor(settings)
        if args.command == "build-runtime":
            return build_runtime_command(args, settings)
        if args.command == "models":
            from pytest_rvv.model.catalog import describe_models

            for line in describe_models(settings, args.rvv_size or "ci"):
                print(line, flush=True)
            return 0
    except RvvError as exc:
        print(f"pytest-rvv: {exc}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
