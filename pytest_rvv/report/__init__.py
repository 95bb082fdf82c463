"""Report stage: the run's sections (sections.py), handed to the terminal summary (terminal.py; one screen unless -v),
Table 1 and plots, the HTML page, results.json; merge, history and notices. Formats what tests recorded; may import
comparison/, conformance/ and below."""
