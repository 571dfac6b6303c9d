"""The operator page at /tally/ui: a read-only, server-rendered look at providers,
their usage, consumers and history; a client of the Placement API, as the CLI is
(app.py: routes and the one error path; auth.py: the token cookie and login form;
views.py: the data, read through a PlacementClient; render.py and templates/: the
HTML, Jinja2 with autoescaping; seams.py: where claim history and capacity counts
plug in; errors.py: the page's refusals). The server it runs in gives it its client
and who may read it (tally.serve.page)."""
