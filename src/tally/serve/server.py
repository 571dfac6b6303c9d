"""How `tally serve` serves: whole requests are read before a thread runs them.

One process, or N pre-forked processes sharing one listening socket (`--workers N`),
each with `Limits.threads` threads for the app. In each process waitress's I/O loop
reads every connection without blocking: the request line, the headers and the body
(de-chunked) are buffered for the connection, and only a complete request is handed
to a thread. A client that sends half a request, or trickles it, costs a socket and a
buffer, never a thread, and its request is cut off `Limits.read_seconds` after its
first byte (408). Requests past the limits below are refused by the I/O loop itself
with Placement's JSON error body (413, 414, 431, 400, 408) and a request log line,
before any app code runs.

    master (N > 1): binds, forks N workers, restarts a worker that dies,
                    passes SIGTERM/SIGINT on and waits for them
    worker:         builds the app (and the lab's ticker) after the fork, then
                    I/O loop --complete request--> thread pool --> WSGI app
                    (the loop: `tally.serve.io_loop`, on epoll where there is one)
"""

from __future__ import annotations

import dataclasses
import faulthandler
import json
import logging
import os
import resource
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser, ParsingError
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask, ThreadedTaskDispatcher, WSGITask
from waitress.utilities import BadRequest, RequestEntityTooLarge

from tally import memory
from tally.db import forks
from tally.placement.error_responses import server_error_document
from tally.serve import admission, io_loop, prefork
from tally.serve.framing import ChunkedBody, Refusal, ambiguous_framing

log = logging.getLogger("tally.serving")
request_log = logging.getLogger("tally.requestlog")
# "Task queue depth is N": requests waiting for one of the threads, which is how the
# I/O loop is meant to absorb bursts; a warning per request under load is noise.
logging.getLogger("waitress.queue").setLevel(logging.ERROR)

WSGIApp = Callable[[dict[str, Any], Callable], Iterable[bytes]]
OUT_BUFFER_IN_MEMORY = 64 << 20  # an answer up to this size is sent from memory


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request may be. `body` comes from the `max_body_bytes` setting."""

    request_line: int = 8190  # bytes of "METHOD URI HTTP/1.1"; longer: 414
    header_fields: int = 100  # more header lines: 431
    header_field: int = 8190  # bytes of one header line; longer: 431
    header_block: int = 65536  # request line and headers together; more: 431
    body: int = 1048576  # bytes after de-chunking; more: 413
    chunk_line: int = 256  # bytes of a chunk-size line with its extensions; longer: 400
    trailer: int = 8192  # bytes of a chunked body's trailer fields; more: 431
    read_seconds: float = 30.0  # the whole request within this of its first byte: 408
    idle_seconds: float = 60.0  # a kept-alive connection waiting this long is closed
    connections: int = 2000  # open connections per process; beyond, the longest waiting goes
    threads: int = 8  # threads per process running complete requests
    bodies: int = 128 << 20  # request body bytes held at once per process; beyond: 503


class RequestLineTooLong(Refusal):
    code, reason = 414, "Request-URI Too Long"


class TooManyHeaders(Refusal):
    code, reason = 431, "Request Header Fields Too Large"


class RequestTimeout(Refusal):
    code, reason = 408, "Request Timeout"


class TooManyBodies(Refusal):
    code, reason = 503, "Service Unavailable"


# ---------------------------------------------------------------- one request


class _Parser(HTTPRequestParser):
    """waitress's parser, with the request line, header field and chunk framing
    limits it lacks, and the time the request's first byte came (for the read
    deadline)."""

    line_ok = False
    line = b""  # the request line, once it was read whole
    body_held = 0  # body bytes counted against `Limits.bodies`
    fields_refusal: BadRequest | None = None
    framing_refused = False

    def __init__(self, adj: Adjustments) -> None:
        super().__init__(adj)
        self.started = time.monotonic()

    def received(self, data: bytes) -> int:
        if not self.line_ok and self.body_rcv is None and not self.completed:
            refusal = self._check_line(self.header_plus + data)
            if refusal is not None:
                self.refuse(refusal)
                return len(data)
        consumed = super().received(data)
        if self.framing_refused:
            return len(data)  # nothing after an ambiguous request is parsed (smuggling)
        limit = self.adj.tally_limits.body
        if self.error is None and self.fields_refusal is not None:
            self.error, self.completed = self.fields_refusal, True
        elif self.error is None and self.body_rcv is not None:
            # the body as the app reads it (waitress counts chunked framing too)
            size = len(self.body_rcv) if self.chunked else self.content_length
            if size > limit:
                self.error = RequestEntityTooLarge(f"exceeds {limit}")
                self.completed = True
            else:
                self._hold(len(self.body_rcv))
        return consumed

    def _hold(self, held: int) -> None:
        """Count the body bytes this request holds (every 64 KiB of growth); past
        the process's bound, the request whose body began longest ago is refused."""
        if held >> 16 != self.body_held >> 16:
            self.body_held = held
            bound = self.adj.tally_limits.bodies
            victim = admission.body_to_refuse(self, bound)
            if victim is not None:
                victim.refuse(
                    TooManyBodies(
                        f"The server holds more than {bound} bytes of request bodies at "
                        "once; try again."
                    )
                )

    def parse_header(self, header_plus: bytes) -> None:
        """Called once, with the request line and headers read whole."""
        line, *fields = header_plus.split(b"\r\n")
        ambiguous = ambiguous_framing(line, fields)
        if ambiguous:  # refused before waitress reads a byte of any body by it
            try:  # the request line alone: the answer's HTTP version
                super().parse_header(header_plus.split(b"\r\n", 1)[0] + b"\r\n")
            except ParsingError:
                super().parse_header(b"GET / HTTP/1.0\r\n")
            self.error, self.completed, self.framing_refused = BadRequest(ambiguous), True, True
            return
        super().parse_header(header_plus)
        limits: Limits = self.adj.tally_limits
        if self.chunked:  # waitress's reader holds framing lines of any length
            self.body_rcv = ChunkedBody(self.body_rcv.getbuf(), limits.chunk_line, limits.trailer)
        if len(fields) > limits.header_fields:
            self.fields_refusal = TooManyHeaders(
                f"The request has more than {limits.header_fields} header fields."
            )
        elif any(len(field) > limits.header_field for field in fields):
            self.fields_refusal = TooManyHeaders(
                f"A header field is longer than {limits.header_field} bytes."
            )

    def refuse(self, error: BadRequest) -> None:
        """End this request with `error` (answered by `_ErrorTask`, then the
        connection is closed), as waitress does for its own limits."""
        if not self.headers_finished:
            self.parse_header(b"GET / HTTP/1.0\r\n")  # what the error task reads
        self.error = error
        self.completed = True

    def _check_line(self, head: bytes) -> BadRequest | None:
        """414 once the request line is longer than allowed (read at most that far)."""
        limit = self.adj.tally_limits.request_line
        head = head.lstrip()  # blank lines between pipelined requests are allowed
        end = head.find(b"\r\n", 0, limit + 2)
        if end < 0 and len(head) > limit:
            return RequestLineTooLong(f"The request line is longer than {limit} bytes.")
        if end >= 0:
            self.line_ok, self.line = True, head[:end]
        return None


def _detail(error: BadRequest, limits: Limits) -> str:
    """What a refusal says: ours as raised, waitress's own reworded."""
    if isinstance(error, Refusal):
        return error.body
    if error.code == 431:
        return f"The request line and headers are larger than {limits.header_block} bytes."
    if error.code == 413:
        return f"Request body is larger than {limits.body} bytes."
    if error.code == 400:
        return f"Malformed request: {error.body}"
    if error.code == 501:
        return f"{error.body} Only chunked is."
    return "An unexpected error occurred."


class _ErrorTask(ErrorTask):
    """A refused request (or an app that raised instead of answering): Placement's
    JSON error document and request log line instead of waitress's plain page."""

    def execute(self) -> None:
        error, request = self.request.error, self.request
        limits: Limits = self.channel.adj.tally_limits
        request_id = f"req-{uuid.uuid4()}"
        detail = _detail(error, limits)
        body = refusal_body(error.code, error.reason, detail, request_id)
        self.status = f"{error.code} {error.reason}"
        self.response_headers.extend(
            [
                ("Content-Type", "application/json"),
                ("openstack-request-id", request_id),
                ("x-openstack-request-id", request_id),
            ]
        )
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)
        # the request line as sent (when it came whole), not waitress's stand-in
        method, _, rest = getattr(request, "line", b"").decode("latin-1").partition(" ")
        uri = rest.rpartition(" ")[0][:200]
        request_log.info(
            '[%s] %s "%s %s" status: %s len: %d',
            request_id,
            self.channel.addr[0] if self.channel.addr else "-",
            method or "-",
            uri or "-",
            error.code,
            len(body),
        )


def refusal_body(status: int, title: str, detail: str, request_id: str) -> bytes:
    """Placement's error document for a request the server refused before any
    microversion was read: every field, `code` included."""
    return json.dumps(server_error_document(status, title, detail, request_id)).encode()


JOIN_HEADER_BELOW = 65536  # a body block below this size goes out in one send with the header


class _Task(WSGITask):
    """waitress's task, sending the response header and a small first body block in
    one send (waitress sends each as it comes: two segments, and two reads for the
    client, for every small answer)."""

    def service(self) -> None:
        try:
            super().service()
        finally:
            memory.after_answer(self.content_bytes_written)

    def write(self, data: bytes) -> None:
        if self.wrote_header or not self.complete:
            return super().write(data)
        joined = len(data) < JOIN_HEADER_BELOW
        channel = self.channel
        channel.held = self.build_response_header()
        self.wrote_header = True
        try:
            super().write(data if joined else b"")
        finally:
            held, channel.held = channel.held, b""
            if held:  # no body (HEAD, 204, 304), or a big one: the header alone
                channel.write_soon(held)
        if not joined:
            super().write(data)


class _Channel(HTTPChannel):
    parser_class = _Parser
    task_class = _Task
    error_task_class = _ErrorTask
    held = b""  # the response header, waiting for the first body block

    def write_soon(self, data: bytes) -> int:
        if self.held and data:
            data, self.held = self.held + data, b""
        return super().write_soon(data)


class _Server(TcpWSGIServer):
    """waitress's server on a socket bound before, with the read deadline, and (in a
    pre-forked worker) leaving when the master is gone."""

    channel_class = _Channel
    master_pid: int | None = None

    def run(self) -> None:
        """waitress's loop, on epoll where there is one (`tally.serve.io_loop`)."""
        if not io_loop.available() or not isinstance(self._map, io_loop.Channels):
            return super().run()
        try:
            io_loop.EpollLoop(self._map, self).run(self.adj.asyncore_loop_timeout)
        except (SystemExit, KeyboardInterrupt):
            self.task_dispatcher.shutdown()

    def readable(self) -> bool:
        """waitress's (its maintenance each second); at the connection limit, whether
        a waiting connection can make room."""
        now = time.time()
        if now >= self.next_channel_cleanup:
            self.next_channel_cleanup = now + self.adj.cleanup_interval
            self.maintenance(now)
        if not self.accepting or len(self._map) < self.adj.connection_limit:
            return self.accepting
        return admission.longest_waiting(self.active_channels.values()) is not None

    def handle_accept(self) -> None:
        """At the limit the connection waiting longest gives way (`tally.serve.admission`)."""
        if len(self._map) >= self.adj.connection_limit:
            waiting = admission.longest_waiting(self.active_channels.values())
            if waiting is None:
                return  # every one is being answered: the new one waits in the backlog
            waiting.handle_close()
        super().handle_accept()

    def maintenance(self, now: float) -> None:
        super().maintenance(now)  # closes connections idle past `idle_seconds`
        memory.release_if_due()
        if self.master_pid is not None and os.getppid() != self.master_pid:
            log.warning("master %d is gone: worker %d stops", self.master_pid, os.getpid())
            raise SystemExit(0)
        limits: Limits = self.adj.tally_limits
        cutoff = time.monotonic() - limits.read_seconds
        for channel in list(self.active_channels.values()):
            request = channel.request
            if request is None or channel.requests:
                continue
            if not request.completed:  # (else refused while arriving: see `_hold`)
                if request.started > cutoff:
                    continue
                request.refuse(
                    RequestTimeout(
                        f"The request was not received within {limits.read_seconds:g} seconds."
                    )
                )
            with channel.requests_lock:
                channel.request = None
                channel.requests.append(request)
                self.add_task(channel)


def make_server(app: WSGIApp, sock: socket.socket, limits: Limits) -> _Server:
    """A server for `app` on the listening socket `sock` (call `.run()`)."""
    adj = Adjustments(
        sockets=[sock],
        threads=limits.threads,
        connection_limit=limits.connections,
        channel_timeout=limits.idle_seconds,
        cleanup_interval=1,
        max_request_header_size=limits.header_block,
        # on the wire, chunk framing included (the body itself: `_Parser.received`)
        max_request_body_size=limits.body * 16 + 65536,
        asyncore_use_poll=True,  # select() stops at 1024 descriptors
        # an answer is in memory already: not copied to a temporary file to be sent
        # (waitress spills what is queued past 1 MB; candidates answers reach 6 MB)
        outbuf_overflow=OUT_BUFFER_IN_MEMORY,
        clear_untrusted_proxy_headers=False,  # the app sees every header, as before
        ident="tally",
    )
    adj.tally_limits = limits
    dispatcher = ThreadedTaskDispatcher()
    dispatcher.set_thread_count(limits.threads)
    return _Server(
        app,
        map=io_loop.Channels(),
        _sock=sock,
        dispatcher=dispatcher,
        adj=adj,
        bind_socket=False,
        sockinfo=(sock.family, sock.type, sock.proto, sock.getsockname()),
    )


# ---------------------------------------------------------------- processes


def listen(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """The listening socket every worker accepts from."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    sock.listen(backlog)
    return sock


def serve(
    sock: socket.socket, build: Callable[[], WSGIApp], limits: Limits, workers: int = 1
) -> None:
    """Serve until SIGTERM/SIGINT: in this process, or in `workers` forked ones.
    `build` makes the app in the process that serves it (after the fork)."""
    _raise_open_files(limits.connections + 256)
    if workers <= 1:
        _run_worker(sock, build, limits, master_pid=None)
        return
    master = prefork.Master(
        lambda master_pid: _run_worker(sock, build, limits, master_pid),
        workers,
        before_fork=forks.before_fork,  # no database connection may cross a fork
    )
    try:
        master.run()
    except forks.ForkUnsafe as exc:
        log.error("%s", exc)
        raise SystemExit(1) from None


def _raise_open_files(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        new = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))


def _stop(signum: int, frame: object) -> None:
    """Leave the serving loop: the request threads get what is left of the grace to
    finish. Past it the process ends whatever a thread still does or holds (a walk
    that never ends, a lock its teardown waits for): faulthandler's own thread, which
    needs no Python lock, writes every thread's stack to stderr and exits."""
    if not _stopping.is_set():
        _stopping.set()
        faulthandler.dump_traceback_later(max(prefork.GRACE_SECONDS - 1, 1), exit=True)
    raise SystemExit(0)


_stopping = threading.Event()  # a second signal does not push the deadline back


def _run_worker(
    sock: socket.socket, build: Callable[[], WSGIApp], limits: Limits, master_pid: int | None
) -> None:
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    memory.keep()  # before any thread: arenas are made per thread on demand
    try:
        _serve_built(sock, build, limits, master_pid)
    finally:
        # Background writers (the failed searches') write what they hold, whenever
        # the signal came (while building, too). The master passes its SIGTERM on
        # after the group's own: a second signal must not cut the writing short (the
        # first one's deadline still ends a hung process).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        forks.stop_background()


def _serve_built(
    sock: socket.socket, build: Callable[[], WSGIApp], limits: Limits, master_pid: int | None
) -> None:
    try:
        app = build()
    except Exception:
        log.exception("worker %d could not build the app", os.getpid())
        raise SystemExit(prefork.BOOT_FAILED) from None
    server = make_server(app, sock, limits)
    server.master_pid = master_pid
    log.info("worker %d serving (%d threads)", os.getpid(), limits.threads)
    server.run()  # returns on SystemExit, after the threads finish (at most 5 s)
