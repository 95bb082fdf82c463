"""The ``pytest-rvv`` command: ``doctor``, ``models``, ``build-runtime``, ``bisect``, ``bisect-run``, ``sweep``,
``history`` and ``merge``."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from pytest_rvv.base.errors import RvvError
from pytest_rvv.base.progress import Progress
from pytest_rvv.config.settings import OPTIONS, SOURCE_ENV, TOOLS_DIR_ENV, Option, Settings, read_pyproject_table


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
    build.add_argument("--tools-dir", metavar="DIR", type=Path, help=f"default ${TOOLS_DIR_ENV} or "
                       "~/.cache/pytest-rvv/tools")
    bisect = commands.add_parser(
        "bisect", help="find the first IREE release whose verdict on a pytest selection is bad: "
                       "pytest-rvv bisect --good 3.9.0 --bad 3.13.0 -- PYTEST-ARGS")
    bisect.add_argument("--good", required=True, metavar="VERSION", help="a release whose selection passes")
    bisect.add_argument("--bad", required=True, metavar="VERSION", help="a newer release whose selection fails")
    bisect.add_argument("--index-url", metavar="URL", help="pip's index (e.g. one of nightly builds)")
    bisect.add_argument("--find-links", metavar="URL|DIR", action="append", default=[], help="pip's --find-links")
    bisect.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then the pytest arguments")
    sweep = commands.add_parser(
        "sweep", help="run a pytest selection with every released compiler in a range, results per version (for "
                      "the report's history): pytest-rvv sweep --versions 3.9.0..3.13.0 -- PYTEST-ARGS")
    sweep.add_argument("--versions", required=True, metavar="A..B", help="a range of iree-base-compiler releases")
    sweep.add_argument("--out", type=Path, default=Path("rvv-history"), metavar="DIR",
                       help="where each version's results go (default: rvv-history; the report reads it)")
    sweep.add_argument("--index-url", metavar="URL", help="pip's index")
    sweep.add_argument("--find-links", metavar="URL|DIR", action="append", default=[], help="pip's --find-links")
    sweep.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then the pytest arguments")
    history = commands.add_parser(
        "history", help="per cell, each dispatch's exact metrics over a sweep's toolchain versions: graphs, every "
                        "change point ranked by added work with a bisect line, first-to-last drift: "
                        "pytest-rvv history rvv-history")
    history.add_argument("folders", nargs="*", type=Path, default=[Path("rvv-history")], metavar="DIR",
                         help="sweep folders (<version>/results.json inside; default: rvv-history)")
    history.add_argument("--out", type=Path, default=Path("rvv-history-report"), metavar="DIR",
                         help="where the graphs, index.html and changes.json go (default: rvv-history-report)")
    history.add_argument("--added-work", type=float, default=5.0, metavar="PERCENT",
                         help="the gate's threshold between neighbouring versions, as after an upgrade (default 5)")
    history.add_argument("--fail-on-regression", action="store_true",
                         help="exit 1 when the gate finds a regression between any two versions or first to last")
    bisect_run = commands.add_parser(
        "bisect-run", help="a `git bisect run` step in an IREE checkout: exit 0 good, 1 bad, 125 cannot test")
    bisect_run.add_argument("--build", type=Path, default=Path("build"), metavar="DIR",
                            help="the IREE build directory to test (default: build)")
    bisect_run.add_argument("--build-cmd", metavar="CMD", help="build this commit first (e.g. 'cmake --build build "
                            "--target iree-compile'); its failure is exit 125")
    bisect_run.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then the pytest arguments")
    merge = commands.add_parser(
        "merge", help="join the results.json of CI shards (pytest --splits N --group K --rvv-report=DIR) into one: "
                      "pytest-rvv merge shard-1 shard-2 --out merged")
    merge.add_argument("shards", nargs="+", type=Path, metavar="DIR|FILE", help="each shard's --rvv-report folder")
    merge.add_argument("--out", type=Path, default=Path("rvv-merged"), metavar="DIR",
                       help="where the joined results.json and summary.md go (default: rvv-merged)")
    for sub in (doctor, models, build):
        for option in OPTIONS:
            sub.add_argument(option.flag, dest=option.dest, metavar=option.metavar, help=option.help)
    return parser


def build_runtime_command(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when the runtime is built or already there, 3 when no source can be had, 1 when the build fails."""
    from pytest_rvv.toolchain.runtime_build import (
        BuildFailed,
        NamedSource,
        SourceNotFound,
        build_runtime,
        commit_mismatch,
        find_source,
    )
    from pytest_rvv.toolchain.toolchain import find_toolchain

    tools_dir = args.tools_dir or settings.tools_dir
    toolchain = find_toolchain(settings.iree_build)

    log = Progress("build-runtime").log

    with tempfile.TemporaryDirectory(prefix="pytest-rvv-iree-src-") as scratch:
        try:
            named = NamedSource.given(args.source, settings.iree_source)
            source = find_source(toolchain.compiler_version, named, Path(scratch))
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


def bisect_command(args: argparse.Namespace) -> int:
    from pytest_rvv.comparison.bisect import bisect_releases, bisect_run
    from pytest_rvv.config.settings import default_tools_dir

    pytest_args = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args

    log = Progress(args.command).log

    if args.command == "bisect-run":
        return bisect_run(args.build.resolve(), pytest_args, Path.cwd(), args.build_cmd, log)
    pip_args = (("--index-url", args.index_url) if args.index_url else ()) + tuple(
        arg for link in args.find_links for arg in ("--find-links", link))
    if args.command == "sweep":
        from pytest_rvv.comparison.sweep import sweep

        return sweep(args.versions, pytest_args, args.out.resolve(), default_tools_dir(), Path.cwd(), pip_args, log)
    return bisect_releases(args.good, args.bad, pytest_args, default_tools_dir(), Path.cwd(), pip_args, log)


def history_command(args: argparse.Namespace, settings: Settings) -> int:
    from pytest_rvv.comparison.history import changes, drifts, judged, load
    from pytest_rvv.report.history_page import change_lines, write

    history = load(args.folders)
    if not history.versions:
        for note in history.notes:
            print(f"pytest-rvv history: {note}", file=sys.stderr)
        print("pytest-rvv history: no version to draw; run pytest-rvv sweep first", file=sys.stderr)
        return 2
    found = changes(history)
    findings = judged(history, settings.known_targets, args.added_work, settings.max_vector_share_drop)
    drift = drifts(history)
    page = write(history, found, drift, findings, args.out)
    print(f"{len(history.versions)} versions ({', '.join(v.name for v in history.versions)}), "
          f"{len(history.cells)} cells, {len(found)} change points")
    for line in change_lines(found):
        print(line)
    for item in drift:
        print(f"drift: {item.text()}")
    regressions = [f for f in findings if f.regression]
    for finding in regressions:
        print(f"REGRESSED: {finding.text()}")
    for (model, target), gaps in sorted(history.gaps.items()):
        print(f"gap: {model} on {target}: " + "; ".join(f"{v} ({why})" for v, why in gaps.items()))
    for note in history.notes:
        print(f"left out: {note}")
    print(f"graphs, index.html and changes.json: {page.parent}")
    return 1 if regressions and args.fail_on_regression else 0


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
            from pytest_rvv.cli.doctor import run_doctor

            return run_doctor(settings)
        if args.command == "build-runtime":
            return build_runtime_command(args, settings)
        if args.command == "merge":
            from pytest_rvv.report.merge import merge_command

            return merge_command(args.shards, args.out)
        if args.command == "history":
            return history_command(args, settings)
        if args.command in ("bisect", "bisect-run", "sweep"):
            return bisect_command(args)
        if args.command == "models":
            from pytest_rvv.cli.models import describe_models

            for line in describe_models(settings, args.rvv_size or "ci"):
                print(line, flush=True)
            return 0
    except RvvError as exc:
        print(f"pytest-rvv: {exc}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
