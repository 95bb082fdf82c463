"""Small shared infrastructure: errors, the content-addressed store, processes, tools, wheels, C builds, TOML,
progress and stage timing. Imports nothing of pytest_rvv outside base/."""
