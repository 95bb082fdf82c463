"""Join the ``results.json`` of CI shards (``pytest suites/ --splits N --group K --rvv-report=shard-K``) into one.

Each shard ran a disjoint part of the same suite with the same toolchain; the merge keeps every
test and metric record once, refuses shards of different toolchains or schemas (one line each),
and writes ``results.json`` plus ``summary.md`` (the verdict grid and the failures, also appended
to ``$GITHUB_STEP_SUMMARY`` on GitHub Actions).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.base.store import atomic_write_bytes
from pytest_rvv.report.results import SCHEMA, append_step_summary, step_summary, write_results

ORDER = ("failed", "error", "could-not-run", "xpassed", "passed", "xfailed", "skipped")


def load_shard(path: Path) -> dict[str, Any]:
    """One shard's results.json (a folder holding one, or the file); one ConfigError line when it is not one."""
    file = path / "results.json" if path.is_dir() else path
    try:
        document = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{file}: not a readable results.json ({exc}); give the --rvv-report folder of each "
                          "shard") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise ConfigError(f"{file}: schema {document.get('schema') if isinstance(document, dict) else None!r}, "
                          f"not {SCHEMA}; merge shards written by the same pytest-rvv")
    return document


def merge(documents: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """One results document from shards of one run: tests and metrics once each, in a stable order."""
    if not documents:
        raise ConfigError("pytest-rvv merge: give the results.json (or --rvv-report folder) of each shard")
    toolchains = {json.dumps(d["run"].get("toolchain"), sort_keys=True) for d in documents}
    if len(toolchains) > 1:
        raise ConfigError("pytest-rvv merge: the shards ran different toolchains "
                          f"({'; '.join(sorted(toolchains))}); merge shards of one run")
    tests: dict[str, dict[str, Any]] = {}
    for document, name in zip(documents, names, strict=True):
        for test in document["tests"]:
            if test["nodeid"] in tests and tests[test["nodeid"]] != test:
                raise ConfigError(f"pytest-rvv merge: {test['nodeid']} ran in two shards with different outcomes "
                                  f"({name}); the shards overlap")
            tests[test["nodeid"]] = test
    metrics = {(m["model"], m["target"], m["metric"], m["machine"]): m for d in documents for m in d["metrics"]}
    run = dict(documents[0]["run"]) | {"shards": [{"name": name, "command": d["run"].get("command"),
                                                   "machine": d["run"].get("machine"), "date": d["run"].get("date")}
                                                  for d, name in zip(documents, names, strict=True)]}
    return {"schema": SCHEMA, "run": run, "tests": [tests[k] for k in sorted(tests)],
            "metrics": [metrics[k] for k in sorted(metrics)]}


def grid(document: dict[str, Any]) -> list[list[str]]:
    """Model x target, each cell the worst outcome of its tests."""
    cells: dict[tuple[str, str], list[str]] = {}
    for test in document["tests"]:
        cells.setdefault((test["model"], test["target"]), []).append(test["outcome"])
    models = sorted({m for m, _ in cells})
    targets = sorted({t for _, t in cells})
    worst = {cell: min(outcomes, key=lambda o: ORDER.index(o) if o in ORDER else len(ORDER))
             for cell, outcomes in cells.items()}
    return [["model", *targets]] + [[m, *(worst.get((m, t), "") for t in targets)] for m in models]


def merge_command(shards: Sequence[Path], out: Path) -> int:
    """``pytest-rvv merge``: write the joined results.json and summary.md; 1 when any test failed."""
    document = merge([load_shard(p) for p in shards], [str(p) for p in shards])
    out.mkdir(parents=True, exist_ok=True)
    write_results(out, document)
    failures = [(t["nodeid"], t["outcome"]) for t in document["tests"]
                if t["outcome"] in ("failed", "error", "could-not-run")]
    summary = step_summary(grid(document), failures)
    atomic_write_bytes(out / "summary.md", summary.encode())
    append_step_summary(summary)
    counts = {o: sum(t["outcome"] == o for t in document["tests"]) for o in ORDER}
    print(f"pytest-rvv merge: {len(shards)} shards, {len(document['tests'])} tests ("
          + ", ".join(f"{n} {o}" for o, n in counts.items() if n) + f"), {len(document['metrics'])} metrics -> "
          f"{out / 'results.json'} and {out / 'summary.md'}")
    return 1 if failures else 0
