"""The ``pytest-rvv`` command: ``pytest-rvv doctor`` and ``pytest-rvv models``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_rvv.errors import RvvError
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
    for sub in (doctor, models):
        for option in OPTIONS:
            sub.add_argument(option.flag, dest=option.dest, metavar=option.metavar, help=option.help)
    return parser


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
