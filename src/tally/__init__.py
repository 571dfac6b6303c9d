"""Tally: a Placement-compatible resource accounting service."""

# The distribution's name (the package and the command are `tally`; "tally" on PyPI is
# an unrelated project). No index has it: it installs from its checkout,
# `pip install '.[postgres]'`, or a wheel built there (tally.install).
DISTRIBUTION = "tally-placement"
