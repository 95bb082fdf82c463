"""Run reports: a self-contained HTML page (html.py), results other tools read (results.py)."""
