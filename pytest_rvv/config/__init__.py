"""What the user asks for: settings (options, environment, pyproject.toml), targets, boards, machine identity and the
silicon cores estimates are made for. May import model/, xdist/ and base/."""
