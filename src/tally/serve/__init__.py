"""The HTTP serving stack: the app composed, the server and its I/O loop, the edge's
limits, health, metrics, logs and the WSGI entry."""
