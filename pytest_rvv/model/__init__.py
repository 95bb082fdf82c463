"""Model stage: sources in wheels, preparation, builders, quantization and the registry of built-in models.
May import xdist/ and base/ only."""
