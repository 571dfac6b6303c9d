"""The I/O loop of a `tally serve` worker: waitress's, without asking every
connection what it waits for on every turn.

waitress's loop (`wasyncore.poll2`) builds a new poll set each turn from every
dispatcher's `readable()` and `writable()`: with N open connections each request
pays N calls of each, and kept-alive connections are many (every nova-compute
keeps one): 500 idle ones doubled the time of `GET /` (0.96 -> 2.1 ms), 1,500 made
it 7 ms. This loop keeps the descriptors in an epoll set and asks again only
those whose answer can have changed since the last turn:

- the server itself, every turn (its `readable()` runs waitress's maintenance);
- descriptors added to or removed from the map (`Channels` notes them);
- those that had an event (read, written, closed);
- those not simply waiting to read: a request queued or running in a task thread
  (the thread changes the channel, then wakes the loop through the trigger), an
  answer still being sent, a close pending;
- all of them, on a turn where the maintenance ran (it closes idle connections and
  hands timed-out requests to a task).

A connection idle between requests answers `readable()` and nothing else, and keeps
doing so until its socket has an event: it is not asked again until then.
Events are handed to the dispatchers exactly as `wasyncore.poll2` hands them.
"""

from __future__ import annotations

import select
from typing import Any

from waitress import wasyncore

READ = select.POLLIN | select.POLLPRI
WRITE = select.POLLOUT


class Channels(dict):
    """A waitress socket map (descriptor -> dispatcher) that notes which descriptors
    were added or removed since the loop last looked."""

    def __init__(self) -> None:
        super().__init__()
        self.changed: set[int] = set()

    def __setitem__(self, fd: int, dispatcher: Any) -> None:
        super().__setitem__(fd, dispatcher)
        self.changed.add(fd)

    def __delitem__(self, fd: int) -> None:
        super().__delitem__(fd)
        self.changed.add(fd)


def available() -> bool:
    return hasattr(select, "epoll")


class EpollLoop:
    """Runs the dispatchers of `channels`, whose server is `server`, until the map
    is empty (as `wasyncore.loop`)."""

    def __init__(self, channels: Channels, server: Any) -> None:
        self.channels = channels
        self.server = server
        self.epoll = select.epoll()
        self.registered: dict[int, tuple[Any, int]] = {}  # fd -> (dispatcher, flags)
        self.unsettled: set[int] = set()  # fds to ask again next turn

    def run(self, timeout: float) -> None:
        try:
            while self.channels:
                self.turn(timeout)
        finally:
            self.epoll.close()

    def turn(self, timeout: float) -> None:
        channels = self.channels
        asked, channels.changed = channels.changed, set()
        asked |= self.unsettled
        maintained = self.server.next_channel_cleanup
        self.ask(self.server._fileno)  # (may run the maintenance)
        if self.server.next_channel_cleanup != maintained:
            asked.update(channels)
        asked.discard(self.server._fileno)  # (asked already)
        for fd in asked:
            self.ask(fd)
        for fd, flags in self.epoll.poll(timeout):
            dispatcher, watched = channels.get(fd), self.registered.get(fd)
            if dispatcher is None or watched is None or watched[0] is not dispatcher:
                continue  # closed in this turn (its number maybe taken by a new socket)
            wasyncore.readwrite(dispatcher, flags)
            self.unsettled.add(fd)

    def ask(self, fd: int | None) -> None:
        """Register `fd` for what its dispatcher waits for now."""
        if fd is None:
            return
        dispatcher = self.channels.get(fd)
        if dispatcher is None:
            self.unsettled.discard(fd)
            self._forget(fd)
            return
        flags = READ if dispatcher.readable() else 0
        if dispatcher.writable() and not dispatcher.accepting:
            flags |= WRITE
        if flags == READ:
            self.unsettled.discard(fd)  # waits for a request: settled until an event
        else:
            self.unsettled.add(fd)
        before = self.registered.get(fd)
        if before is not None and before[0] is dispatcher and before[1] == flags:
            return
        if flags == 0:
            self._forget(fd)
            return
        try:
            if before is not None and before[0] is dispatcher:
                self.epoll.modify(fd, flags)
            else:
                self._watch(fd, flags)
        except OSError:  # not a socket any more: what poll reports as POLLNVAL
            self.registered.pop(fd, None)
            wasyncore.readwrite(dispatcher, select.POLLNVAL)
            return
        self.registered[fd] = (dispatcher, flags)

    def _watch(self, fd: int, flags: int) -> None:
        """Add `fd`, new to the set, or a number reused by another socket."""
        try:
            self.epoll.register(fd, flags)
        except FileExistsError:
            self.epoll.modify(fd, flags)

    def _forget(self, fd: int) -> None:
        """Take `fd` out of the set, if it is in."""
        if self.registered.pop(fd, None) is None:
            return
        try:
            self.epoll.unregister(fd)
        except (OSError, ValueError):
            pass  # closed already: epoll dropped it with its socket
