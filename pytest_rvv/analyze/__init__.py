"""Measure stage: static analysis of the generated dispatch code (instruction classes, per dispatch)."""
