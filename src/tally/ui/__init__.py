"""The operator page at /tally/ui: a read-only, server-rendered look at providers,
their usage, consumers and history (app.py: routes; auth.py: who may read it and the
token cookie; views.py: the data, read through the ledger; render.py: the HTML;
seams.py: where claim history and capacity counts plug in)."""
