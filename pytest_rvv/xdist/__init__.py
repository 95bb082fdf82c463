"""pytest-xdist: shards over machines and scheduling by model x target cell. May import base/ only."""
