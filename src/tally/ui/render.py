"""The page's HTML: Jinja2 templates (`tally/ui/templates/`) over `tally.ui.views`
data, every value autoescaped.

No script at all: filters, sort and the capacity box are plain GET forms and links,
so the page works without JavaScript and every control is reachable with the
keyboard (a skip link, labels on every field, visible focus). Colour is never the
only signal: every bar carries its numbers as text (used / reserved / capacity and a
percentage), and an over-capacity row or bar says OVER CAPACITY in words too.

Templates are read as one line each (`Compact`): their line breaks and indentation
are for the reader only, so a page is the same bytes however a template is laid out
(and a row of a table is one line of the answer).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
import urllib.parse
from collections.abc import Mapping
from typing import Any

import jinja2
import jinja2.ext

from tally.ui import seams
from tally.ui.sandboxes import SandboxView
from tally.ui.views import SORTS, Amount, ConsumerRow, Overview, ProviderView, Query

HINTS = {
    "noauth": "This server runs with auth_strategy = noauth: the token admin is an admin.",
    "lab": "This server runs with auth_strategy = lab: paste a lab token of an admin user "
    "(openstack --os-cloud tally-lab token issue -f value -c id).",
    "keystone": "Paste a Keystone token of a user with the admin role "
    "(openstack token issue -f value -c id).",
}


class Compact(jinja2.ext.Extension):
    """Each template's lines, stripped, joined without a break: write a space that
    matters inside a line, and no tag or expression across two."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return "".join(line.strip() for line in source.splitlines())


def percent(a: Amount) -> str:
    if math.isinf(a.fraction):
        return "used of no capacity"
    return f"{a.fraction:.0%}"


def bar_width(a: Amount) -> str:
    """The fill of a class's bar, in percent of its width."""
    return f"{100.0 if math.isinf(a.fraction) else min(a.fraction, 1.0) * 100:.1f}"


def fullest(amounts: tuple[Amount, ...]) -> Amount | None:
    return max(amounts, key=lambda a: a.fraction, default=None)


def when(at: object) -> str:
    return at.isoformat(sep=" ", timespec="seconds") if isinstance(at, dt.datetime) else str(at)


def amounts_text(resources: Mapping[str, int]) -> str:
    return ", ".join(f"{rc} {n}" for rc, n in sorted(resources.items())) or "-"


def since(h: ConsumerRow) -> tuple[str, str]:
    """When the consumer's holding began here, and by which request ("-": unknown)."""
    if h.since is None:
        return "-", "-"
    start = when(h.since.time) if h.since_complete else f"on or before {when(h.since.time)}"
    return start, h.since.request_id or "-"


def change(ev: seams.HistoryEvent) -> str:
    """ "VCPU 2 -> 6" for an amount; the detail, compact, for anything else."""
    if ev.resource_class:
        before = "(none)" if ev.before is None else ev.before
        after = "(none)" if ev.after is None else ev.after
        return f"{ev.resource_class} {before} -> {after}"
    text = json.dumps(ev.detail, sort_keys=True, default=str) if ev.detail else ""
    return text if len(text) <= 200 else text[:199] + "..."


def link(root: str, query: Query, **change: str) -> str:
    """The list with `query`'s parameters, `change` applied."""
    params = query.params(**change)
    return f"{root}/" + (f"?{urllib.parse.urlencode(params)}" if params else "")


@functools.cache
def environment() -> jinja2.Environment:
    """The templates, loaded once per process; None renders as nothing."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tally.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=lambda value: "" if value is None else value,
        extensions=[Compact],
    )
    env.filters.update(
        percent=percent,
        bar_width=bar_width,
        fullest=fullest,
        when=when,
        amounts=amounts_text,
        since=since,
        change=change,
        query=urllib.parse.urlencode,
    )
    return env


def _render(template: str, title: str, root: str, who: object = None, **values: Any) -> str:
    page = environment().get_template(template)
    return page.render(title=title, root=root, who=who, **values) + "\n"


def overview(
    view: Overview,
    query: Query,
    root: str,
    who: object = None,
    fits: list[seams.Fit] | None = None,
    shape_error: str | None = None,
) -> str:
    """The provider list, with the capacity box's answer (`fits`, or `shape_error`)."""
    return _render(
        "overview.html",
        "Providers",
        root,
        who,
        view=view,
        query=query,
        sorts=SORTS,
        fits=fits,
        shape_error=shape_error,
        link=functools.partial(link, root, query),
    )


def provider(
    view: ProviderView, root: str, who: object = None, history_available: bool = True
) -> str:
    return _render(
        "provider.html",
        view.provider.name,
        root,
        who,
        view=view,
        history_available=history_available,
    )


def failures(found: list[dict] | None, root: str, who: object = None) -> str:
    """The newest searches that found nothing (None: this Placement keeps none)."""
    return _render("failures.html", "Failed searches", root, who, failures=found)


def sandboxes(found: list[dict] | None, root: str, who: object = None) -> str:
    """The sandboxes alive (None: this Placement has none)."""
    return _render("sandboxes.html", "What-if sandboxes", root, who, found=found)


def sandbox(view: SandboxView, root: str, who: object = None) -> str:
    """One sandbox's diff: providers before and after, the steps refused."""
    return _render("sandbox.html", f"Sandbox {view.sandbox['id']}", root, who, view=view)


def login(root: str, auth_strategy: str, next_path: str = "") -> str:
    return _render(
        "login.html", "Log in", root, hint=HINTS.get(auth_strategy, ""), next_path=next_path
    )


def error(
    status: int,
    title: str,
    detail: str,
    root: str,
    auth_strategy: str,
    request_id: str | None = None,
    next_path: str = "",
) -> str:
    """An error page; after a 401 or 403, with the token form."""
    return _render(
        "error.html",
        f"{status} {title}",
        root,
        status=status,
        error_title=title,
        detail=detail,
        hint=HINTS.get(auth_strategy, ""),
        request_id=request_id,
        next_path=next_path,
    )
