"""A serving process whose workers note failed searches all the time, for the
durability cell of the failures' Recorder (test_failure_notes.py):

    python -m tests.durability.failure_notes QUEUED_FILE

Settings from the environment (TALLY_DATABASE_URL, TALLY_PORT, TALLY_WORKERS). It
prepares the database, then serves the Placement app as `tally serve` does
(tally.serve.server: one process, or forked workers). In each worker a thread notes
failures through the app's own Recorder (`Service.failures`, where the candidates
handler will note them), and appends the request id of each note the Recorder took
to QUEUED_FILE (one short line, one write: lines of workers never mix) after
`note` returned: a line in the file is a note queued before it was written."""

from __future__ import annotations

import datetime as dt
import os
import sys
import threading
import time

from tally.config import load_settings
from tally.db.engine import make_engine
from tally.placement.app import create_app
from tally.placement.ledger.bootstrap import prepare_database
from tally.placement.ledger.failure_records import FailureNote, Recorder
from tally.serve import server as serving
from tally.serve.logs import configure_logging

BURST = 200  # notes a worker takes at once (faster than they are written: the queue
PAUSE = 0.01  # holds some whenever the signal comes), then it pauses this long


def keep_noting(recorder: Recorder, queued: str) -> None:
    fd = os.open(queued, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    pid, i = os.getpid(), 0
    while True:
        i += 1
        request_id = f"req-{pid}-{i}"
        note = FailureNote(
            created_at=dt.datetime.now(dt.UTC).replace(tzinfo=None),
            request_id=request_id,
            global_request_id=f"global-{pid}",
            user_id="durability",
            project_id="durability",
            microversion="1.39",
            query=f"resources=VCPU:{i}",
            reason="capacity",
            verdict={"constraints": [{"constraint": "VCPU", "rules_out": i}]},
        )
        if recorder.note(note):
            os.write(fd, f"{request_id}\n".encode())
        if i % BURST == 0:
            time.sleep(PAUSE)


def main(queued: str) -> None:
    settings = load_settings()
    configure_logging(settings)
    engine = make_engine(settings.database)
    prepare_database(engine)
    engine.dispose()  # workers open their own connections after the fork

    def build() -> serving.WSGIApp:
        app = create_app(settings)
        resource, *_ = app._router.find("/tally/v1/failures")
        recorder = resource.service.failures
        threading.Thread(target=keep_noting, args=(recorder, queued), daemon=True).start()
        return app

    sock = serving.listen(settings.host, settings.port)
    serving.serve(sock, build, serving.Limits(), workers=settings.workers)


if __name__ == "__main__":
    main(sys.argv[1])
