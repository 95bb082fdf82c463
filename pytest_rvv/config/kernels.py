"""The kernel suite's cells: matmul shapes x rows (an element type on the target family that has its extensions)
x matmul paths (config/paths.py), chosen by ``--rvv-kernels`` and ``[tool.pytest_rvv.kernels]``.

Rows follow iree issue 24932's table: f32, f16 native (Zvfh), f16 via f32 (Zvfhmin: stored f16, computed f32),
bf16 (Zvfbfwma) and i8 -> i32, each on the VLEN-256 family of that extension set (SpacemiT X60's VLEN).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.config.cores import CORES, DEFAULT_WALL_THREADS, WallRequest
from pytest_rvv.config.paths import PATHS, matmul_path
from pytest_rvv.config.targets import Target, path_twins
from pytest_rvv.model.kernels import ARGUMENTS_ONLY, DTYPES, E2E, ISSUE_24932, SHAPES, KernelShape, kernel_model, shape
from pytest_rvv.model.model import Model

TABLE = "[tool.pytest_rvv.kernels]"
CORE = "spacemit-x60"  # the VLEN-256 family's core: every kernel row is estimated, and its traffic modelled, on it
WALL = WallRequest(CORES[CORE], DEFAULT_WALL_THREADS)  # every kernel cell's memory traffic and est. wall time
MARK = "rvv_kernels"  # a test over the kernel suite's cells instead of models x targets


@dataclass(frozen=True)
class KernelRow:
    """One row of the dashboard: an element type compiled for one target family."""

    name: str
    dtype: str
    target: str  # the family's default-path target; its path twins give the columns
    by_shape: bool = True  # a selection of shapes alone runs it (a published benchmark's own row runs when named)


ROWS: dict[str, KernelRow] = {r.name: r for r in (
    KernelRow("f32", "f32", "rv64gcv-zvl256b"),
    KernelRow("f16", "f16", "rv64gcv-zvl256b-zvfh"),
    KernelRow("f16-via-f32", "f16", "rv64gcv-zvl256b-zvfhmin"),
    KernelRow("bf16", "bf16", "rv64gcv-zvl256b-zvfbfwma"),
    KernelRow("i8", "i8", "rv64gcv-zvl256b"),
    # iree PR 22231's benchmark as it ran: its function (f16 x f16 -> f32 into an f32 argument, dynamic) on its features
    KernelRow("f16f16f32", "f16f16f32", "rv64imafdv-zvl256b-zvfhmin", by_shape=False),
)}
# iree issue 24932's rows (its table's), every row a selection of shapes runs: what ``ci`` and ``llm`` run
ISSUE_ROWS = tuple(name for name, row in ROWS.items() if row.by_shape)
# what a type needs of a target: any one of these extensions
NEEDS = {"f16": ("zvfh", "zvfhmin"), "f16f16f32": ("zvfh", "zvfhmin"), "bf16": ("zvfbfwma", "zvfbfmin")}
_DECODE = tuple(n for n, s in SHAPES.items() if s.m == 1)
SELECTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # name: (shapes, rows)
    "ci": (ISSUE_24932, ISSUE_ROWS),
    "decode": (_DECODE, ("f32", "f16-via-f32", "i8")),
    "llm": (tuple(n for n, s in SHAPES.items() if s.origin.startswith(("Llama", "Qwen"))), ISSUE_ROWS),
    "all": (tuple(SHAPES), tuple(ROWS)),
    # iree PR 22231's single-thread f16 rows (report/kernels.py PUBLISHED), on its function, features and the two
    # paths it compares: an opt-in calibration step; docs/kernels.md
    "pr22231": (("1024x1024x1024", "2048x2048x2048"), ("f16f16f32",)),
}
_KEYS = {"shapes", "rows", "paths"}


@dataclass(frozen=True)
class KernelCell:
    """One kernel on one target: a dashboard cell (row, shape, path)."""

    row: str
    shape: KernelShape
    path: str
    model: Model
    target: Target

    @property
    def id(self) -> str:
        return f"{self.model.name}-{self.target.name}"


@dataclass(frozen=True)
class Kernels:
    """What the kernel table and ``--rvv-kernels`` choose: shapes, rows and paths, and the cells they make."""

    shapes: Mapping[str, KernelShape]
    rows: Mapping[str, KernelRow]
    paths: tuple[str, ...]
    cells: tuple[KernelCell, ...] = ()
    every_id: frozenset[str] = frozenset()  # every cell's id at any selection (its snapshots are not stale)


def kernels(table: Mapping[str, Any], selection: str | None, known: Mapping[str, Target]) -> Kernels:
    """The kernel suite's shapes, rows, paths and selected cells; one line per bad entry, naming it and the fix."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{TABLE} must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"{TABLE}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_KEYS))}")
    shapes = dict(SHAPES)
    for name, dims in _table(table, "shapes").items():
        shapes[name] = shape(dims, f"{TABLE} shapes.{name}", origin=f"user shape {name}")
    rows = dict(ROWS)
    for name, row in _table(table, "rows").items():
        rows[name] = _row(name, row)
    paths = tuple(table.get("paths", PATHS))
    for path in paths:
        matmul_path(path, f"{TABLE} paths")
    twins = path_twins(known)
    for row in rows.values():
        _check_row(row, known, twins)
    words = [w.strip() for w in (selection or "").split(",") if w.strip()]
    named_paths = tuple(w for w in words if w in PATHS)  # path names narrow the selection to those paths
    chosen = _selection(",".join(w for w in words if w not in PATHS), shapes, rows) if words else set()
    cells, every_id = [], set()
    for row in rows.values():
        family = twins.get(row.target, {"default": row.target})
        for shape_name, s in shapes.items():
            if s.weights and row.dtype in ARGUMENTS_ONLY:
                if (shape_name, row.name) in chosen:
                    raise ConfigError(f"--rvv-kernels: row {row.name} is a function of its arguments only, and shape "
                                      f"{shape_name} holds B as a constant weight; choose an {E2E} shape")
                continue
            model = kernel_model(row.dtype, s)
            for path in paths:
                if path not in family:
                    continue
                cell = KernelCell(row.name, s, path, model, known[family[path]])
                every_id.add(cell.id)
                pair = (shape_name, row.name)
                if pair in chosen and (not named_paths or path in named_paths):
                    cells.append(cell)
    return Kernels(shapes, rows, paths, tuple(cells), frozenset(every_id))


def _table(table: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = table.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"{TABLE}: {key} must be a table of NAME = ...")
    return value


def _row(name: str, row: Any) -> KernelRow:
    where = f"{TABLE} rows.{name}"
    if not isinstance(row, Mapping) or set(row) != {"dtype", "target"}:
        raise ConfigError(f"{where}: give {{ dtype = \"f16\", target = \"TARGET\" }}")
    if row["dtype"] not in DTYPES:
        raise ConfigError(f"{where}: unknown dtype {row['dtype']!r}; known: {', '.join(DTYPES)}")
    return KernelRow(name, str(row["dtype"]), str(row["target"]))


def _check_row(row: KernelRow, known: Mapping[str, Target], twins: Mapping[str, Mapping[str, str]]) -> None:
    where = f"{TABLE} rows.{row.name}" if row.name not in ROWS or ROWS[row.name] != row else f"kernel row {row.name}"
    target = known.get(row.target)
    if target is None:
        raise ConfigError(f"{where}: unknown target {row.target!r}; define it under [tool.pytest_rvv.targets]")
    needs = NEEDS.get(row.dtype, ())
    if needs and not set(needs) & set(target.extensions):
        raise ConfigError(f"{where}: target {row.target} has no {' or '.join(needs)}, which {row.dtype} matmuls "
                          f"need; add +{needs[0]} to its features or choose a target that has it")


def _selection(selection: str, shapes: Mapping[str, KernelShape],
               rows: Mapping[str, KernelRow]) -> set[tuple[str, str]]:
    """(shape, row) pairs: named selections (``ci``, ``decode``, ``llm``, ``all``, ``pr22231``) add theirs; shape and
    row names add their product (``256x256x256,f32``; shapes alone: every row but a published benchmark's own, which
    runs when named; rows alone: the ``ci`` shapes)."""
    words = [w.strip() for w in selection.split(",") if w.strip()]
    unknown = [w for w in words if w not in shapes and w not in rows and w not in SELECTIONS]
    if unknown:
        raise ConfigError(f"--rvv-kernels: unknown {', '.join(unknown)}; give one of {', '.join(SELECTIONS)}, or "
                          f"shape names (e.g. 256x256x256, or a {TABLE} shape), row names ({', '.join(rows)}) and "
                          f"path names ({', '.join(PATHS)})")
    pairs = {(s, r) for w in words if w in SELECTIONS for s in SELECTIONS[w][0] for r in SELECTIONS[w][1]
             if not (shapes[s].weights and rows[r].dtype in ARGUMENTS_ONLY)}  # ``all``: only the pairs a row can hold
    named_shapes = [w for w in words if w in shapes]
    named_rows = [w for w in words if w in rows]
    if named_shapes or named_rows:
        pairs |= {(s, r) for s in named_shapes or SELECTIONS["ci"][0]
                  for r in named_rows or [r for r in rows if rows[r].by_shape]}
    return pairs
