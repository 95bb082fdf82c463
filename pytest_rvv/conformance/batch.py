"""ONNX node tests compiled together: one module per selection x target, each test still run and judged alone.

A node test compiles in about 0.4 s of CPU, nearly all of it iree-compile's own start-up and pipeline around a
single operator: the default selection's 49 tests x 8 targets took 149 s of CPU in 392 compiles (cold run on a
2-core EPYC). Here the imported functions of a selection are put into one module, compiled once per target
(compile/compiler.py, content-addressed as always), and each test runs its own function of that module (a
recorded run, keyed by the module's bytes and the function like any other).

A test compiles alone, exactly as before, when its import failed, when it is listed as an expected import or
compile failure on the target, when its imported MLIR is more than one plain function (globals, resources,
helpers), or when its function's name is already taken. When a batch does not compile, every test compiles
alone: a batch changes the number of compiles, never a verdict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_rvv.base.errors import CompileFailed, ImportFailed
from pytest_rvv.base.store import digest
from pytest_rvv.compile.compiler import Artifact, ImportedModel
from pytest_rvv.config.targets import Target
from pytest_rvv.conformance.node_tests import NodeTest
from pytest_rvv.session import RvvSession

BATCH = "node-tests"  # the batch module's name in the cache's compile entries


@dataclass(frozen=True)
class Member:
    """One node test's imported function, ready to go into a batch."""

    test: str
    function: str
    body: str  # the lines inside ``module { ... }``
    key: str  # its import's cache key


def plain_function(mlir: str) -> str | None:
    """The body of ``mlir`` when it is ``module { <one func.func> }`` and nothing else, else None (the function's
    name is the import's own: ``ImportedModel.function``)."""
    lines = mlir.strip().splitlines()
    if len(lines) < 3 or lines[0].strip() != "module {" or lines[-1].strip() != "}":
        return None
    body = "\n".join(lines[1:-1])
    if body.count("func.func") != 1 or any(word in body for word in ("{-#", "util.global", "ml_program")):
        return None
    return body


def batch_mlir(members: Sequence[Member]) -> str:
    return "module {\n" + "\n".join(m.body for m in members) + "\n}\n"


class NodeBatches:
    """The batches of one session's node-test selection (memoised per process: one fixture per worker)."""

    def __init__(self, session: RvvSession, selection: Sequence[NodeTest]) -> None:
        self.session = session
        self.selection = tuple(selection)
        self._members: dict[frozenset[str], tuple[Member, ...]] = {}
        self._artifacts: dict[tuple[str, frozenset[str]], Artifact | None] = {}

    def artifact(self, test: NodeTest, target: Target, excluded: Collection[str]) -> Artifact | None:
        """``test``'s function in the batch module for ``target``; None when ``test`` compiles alone."""
        left_out = frozenset(excluded)
        if test.name in left_out:
            return None
        members = self.members(left_out)
        mine = next((m for m in members if m.test == test.name), None)
        if mine is None or len(members) < 2:
            return None
        where = (target.name, left_out)
        if where not in self._artifacts:
            self._artifacts[where] = self._compile(members, target)
        artifact = self._artifacts[where]
        return None if artifact is None else dataclasses.replace(artifact, model=test.name, function=mine.function)

    def members(self, excluded: frozenset[str]) -> tuple[Member, ...]:
        """The selection's tests that can share a module, in selection order (each imported once per store)."""
        if excluded not in self._members:
            found: list[Member] = []
            taken: set[str] = set()
            for test in self.selection:
                if test.name in excluded:
                    continue
                try:
                    imported = self.session.compiler.import_onnx(test.name, test.model, None)
                except ImportFailed:
                    continue
                body = plain_function(imported.path.read_text(errors="replace"))
                if body is None or imported.function in taken:
                    continue
                taken.add(imported.function)
                found.append(Member(test.name, imported.function, body, imported.sha256))
            self._members[excluded] = tuple(found)
        return self._members[excluded]

    def _compile(self, members: Sequence[Member], target: Target) -> Artifact | None:
        store = self.session.store
        key = digest(["node-batch-v1", *(f"{m.test}:{m.key}" for m in members)])

        def build(tmp: Path) -> dict[str, object]:
            (tmp / "model.mlir").write_text(batch_mlir(members))
            return {"model": BATCH, "function": members[0].function, "tests": [m.test for m in members]}

        entry = store.get_or_build("node-batches", key, build)
        imported = ImportedModel(entry.file("model.mlir"), str(entry.meta["function"]), key)
        try:
            return self.session.compiler.compile(BATCH, imported, target)
        except CompileFailed:
            return None
