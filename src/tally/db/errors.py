"""The database's own refusal, importable without SQLAlchemy (the CLI decides exit
statuses with it before any command has loaded the database layer)."""


class UnusableDatabase(Exception):
    """Tally will not (or cannot) use this database; the message says why in one line.
    Every command that opens the database (`tally serve`, `tally db ...`) ends with
    that line and exit status 1, never a traceback (`tally.cli.exits`); a WSGI
    server loading `tally.serve.wsgi` fails to load the app with it."""
