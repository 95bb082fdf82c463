"""Users' own models, declared as ``[tool.pytest_rvv.models.NAME]`` tables in pyproject.toml::

    [tool.pytest_rvv.models.my-net]
    path = "models/my-net.onnx"           # relative to pyproject.toml
    inputs = [{ name = "x", shape = [1, 3, 64, 64], dtype = "float32", generator = "uniform", low = -1, high = 1 }]
    # generators: uniform, normal (low=mean, high=std), integers, ones, zeros, text-image,
    #             npy (with file = "inputs/x.npy")
    tolerance = { atol = 1e-4, rtol = 1e-3 }   # int8 models also: steps = 2 (quantization steps of the output)
    preparation = ["fix-dims"]            # optional, the default; also "quantize-int8", "float16"
    marks = ["slow"]                      # optional
    seed = 0                              # optional

A bad entry is reported with the entry's and the field's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.model.model import InputSpec, Model, Tolerance
from pytest_rvv.model.sources import LocalFile

GENERATORS = ("uniform", "normal", "integers", "ones", "zeros", "text-image", "npy")
_MODEL_KEYS = {"path", "inputs", "tolerance", "preparation", "marks", "seed", "opset", "description"}
_INPUT_KEYS = {"name", "shape", "dtype", "generator", "low", "high", "file"}


def model_from_table(name: str, table: Mapping[str, Any], base_dir: Path) -> Model:
    where = f"[tool.pytest_rvv.models.{name}]"

    def fail(field: str, problem: str) -> ConfigError:
        return ConfigError(f"{where} {field}: {problem}")

    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table")
    unknown = set(table) - _MODEL_KEYS
    if unknown:
        raise fail(", ".join(sorted(unknown)), f"unknown field; allowed: {', '.join(sorted(_MODEL_KEYS))}")
    if not isinstance(table.get("path"), str):
        raise fail("path", "give the .onnx file's path (relative to pyproject.toml)")
    raw_inputs = table.get("inputs")
    if not isinstance(raw_inputs, list) or not raw_inputs:
        raise fail("inputs", "give a list of { name, shape, dtype, generator } tables")
    inputs = tuple(_input(raw, i, fail, base_dir) for i, raw in enumerate(raw_inputs))
    tol = table.get("tolerance", {})
    if not isinstance(tol, Mapping) or set(tol) - {"atol", "rtol", "steps"}:
        raise fail("tolerance", "must be { atol = ..., rtol = ..., steps = ... (int8: quantization steps) }")
    try:
        tolerance = Tolerance(**{k: float(v) for k, v in tol.items()})
    except (TypeError, ValueError):
        raise fail("tolerance", "atol, rtol and steps must be numbers") from None
    lists = {}
    for field in ("preparation", "marks"):
        value = table.get(field, ["fix-dims"] if field == "preparation" else [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(field, "must be a list of strings")
        lists[field] = tuple(value)
    for field in ("seed", "opset"):
        if field in table and not isinstance(table[field], int):
            raise fail(field, "must be an integer")
    path = Path(table["path"]).expanduser()
    return Model(
        name=name,
        source=LocalFile(path if path.is_absolute() else base_dir / path),
        inputs=inputs,
        preparation=lists["preparation"],
        tolerance=tolerance,
        opset=table.get("opset", 17),
        seed=table.get("seed", 0),
        marks=lists["marks"],
        description=str(table.get("description", f"user model {name}")),
    )


def _input(raw: Any, index: int, fail: Any, base_dir: Path) -> InputSpec:
    field = f"inputs[{index}]"
    if not isinstance(raw, Mapping):
        raise fail(field, "must be a table { name, shape, dtype, generator }")
    unknown = set(raw) - _INPUT_KEYS
    if unknown:
        raise fail(f"{field}.{sorted(unknown)[0]}", f"unknown field; allowed: {', '.join(sorted(_INPUT_KEYS))}")
    if not isinstance(raw.get("name"), str):
        raise fail(f"{field}.name", "give the graph input's name")
    shape = raw.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d > 0 for d in shape):
        raise fail(f"{field}.shape", "must be a list of positive integers")
    dtype = raw.get("dtype", "float32")
    try:
        np.dtype(dtype)
    except TypeError:
        raise fail(f"{field}.dtype", f"{dtype!r} is not a numpy dtype name") from None
    generator = raw.get("generator", "uniform")
    if generator not in GENERATORS:
        raise fail(f"{field}.generator", f"{generator!r} is not one of {', '.join(GENERATORS)}")
    bounds = {k: raw[k] for k in ("low", "high") if k in raw}
    if not all(isinstance(v, int | float) for v in bounds.values()):
        raise fail(f"{field}.low/high", "must be numbers")
    file = ""
    if generator == "npy":
        if not isinstance(raw.get("file"), str):
            raise fail(f"{field}.file", 'generator "npy" needs file = "path/to/input.npy"')
        path = base_dir / Path(raw["file"]).expanduser()
        if not path.is_file():
            raise fail(f"{field}.file", f"{path} not found")
        file = str(path)
    return InputSpec(raw["name"], tuple(shape), dtype, generator, file=file,
                     **{k: float(v) for k, v in bounds.items()})
