"""Named selections (``--rvv-models=NAME``) of the models not run by default; a builder names its own
(``Builder.selection``). Below the registry and the builders, which both name them."""

from __future__ import annotations

REAL_LAYERS = "real-layers"
STUDIES = "studies"
SELECTIONS = {REAL_LAYERS: "the real-shaped decoder layers",
              STUDIES: "the architectures published studies measure: ResNet18 at 224x224, fp32 and int8"}
