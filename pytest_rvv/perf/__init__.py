"""Measure stage, performance side: time, memory, sizes and counts against stored baselines."""
