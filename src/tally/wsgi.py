"""`tally.wsgi:application`, as deployments written before the serving stack moved
to `tally.serve` name it: the same application (`tally.serve.wsgi`)."""

from tally.serve.wsgi import application

__all__ = ["application"]
