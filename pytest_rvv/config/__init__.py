"""What the user asks for: settings (options, environment, pyproject.toml), targets and the emulator CPU they
run on (emulator.py), boards, machine identity and the silicon cores estimates are made for. May import model/,
xdist/ and base/."""
