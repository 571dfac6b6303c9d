"""The lab compute API: a Nova-compatible subset (services, hypervisors, flavors,
servers, moves) that claims through Placement's public API, as Nova does.

app.py (factory, routes) -> handlers/ (one module per resource; parse, one ops call,
shape with views.py) -> ops/ (scheduling, claims, moves, the resource tracker, faults;
Placement through report.py) -> store/ (SQL on the lab's own tables only).
"""
