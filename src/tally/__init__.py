"""Tally: a Placement-compatible resource accounting service."""

# The distribution's name on PyPI (the package and the command are `tally`; "tally" on
# PyPI is an unrelated project): `pip install tally-placement`.
DISTRIBUTION = "tally-placement"
