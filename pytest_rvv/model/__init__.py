"""Model stage: sources, preparation, inputs and the registry of built-in models."""
