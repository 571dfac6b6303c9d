"""The page's HTML, built from `tally.ui.views` data with the standard library:
every value from the database or the request goes through `e()` (html.escape).

No script at all: filters, sort and the capacity box are plain GET forms and links,
so the page works without JavaScript and every control is reachable with the
keyboard (a skip link, labels on every field, visible focus). Colour is never the
only signal: every bar carries its numbers as text (used / reserved / capacity and a
percentage), and an over-capacity row or bar says OVER CAPACITY in words too.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import math
import urllib.parse
from collections.abc import Iterable, Mapping

from tally.ui import seams
from tally.ui.views import SORTS, Amount, Holder, Overview, ProviderView, Query

CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#111;background:#fff}
header{background:#1f2937;color:#fff;padding:.5em 1em;display:flex;gap:1em;align-items:center}
header a{color:#fff}header .who{margin-left:auto;font-size:.9em}
header form{display:inline;margin:0}
main{padding:1em 1.5em}h1{margin:.2em 0 .5em}
.skip{position:absolute;left:-9999px}.skip:focus{left:1em;top:1em;background:#ff0;color:#000;padding:.3em}
:focus-visible{outline:3px solid #f59e0b;outline-offset:2px}
form.filters,form.shape{display:flex;flex-wrap:wrap;gap:.4em 1em;align-items:end;margin:.5em 0 1em}
form label{display:block;font-size:.85em;font-weight:600}
input,select,button{font:inherit;padding:.25em .4em}
table{border-collapse:collapse;margin:.5em 0 1.5em}
caption{text-align:left;font-weight:600;padding:.3em 0}
th,td{border-bottom:1px solid #ccc;padding:.35em .6em;text-align:left;vertical-align:top}
thead th{background:#f3f4f6}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.uuid,.muted{color:#555;font-size:.85em;font-family:ui-monospace,monospace}
.amount{display:flex;gap:.5em;align-items:center;white-space:nowrap;margin:.1em 0}
.rc{display:inline-block;min-width:9em;font-family:ui-monospace,monospace;font-size:.9em}
.bar{display:inline-block;width:10em;height:.9em;border:1px solid #374151;background:#fff}
.fill{display:block;height:100%;background:#2563eb}
.nums{font-variant-numeric:tabular-nums}
tr.over{background:#fde2e2;box-shadow:inset 6px 0 0 #b91c1c}
.amount.over .fill{background:repeating-linear-gradient(45deg,#b91c1c 0 5px,#7f1d1d 5px 10px)}
.marker{color:#991b1b;font-weight:700}
.notice{background:#fff7d6;border:1px solid #c9a400;padding:.4em .6em;display:inline-block}
.box{border:1px solid #ccc;padding:.2em 1em 0;margin:0 0 1em}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em}dt{font-weight:600}dd{margin:0}
"""


def e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def page(title: str, body: str, root: str, who: str | None = None) -> str:
    logout = ""
    if who:
        logout = (
            f'<span class="who">{e(who)}</span>'
            f'<form method="post" action="{e(root)}/logout"><button type="submit">'
            "Log out</button></form>"
        )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)} - Tally</title><style>{CSS}</style></head><body>"
        '<a class="skip" href="#main">Skip to content</a>'
        f'<header><a href="{e(root)}/"><strong>Tally</strong> providers</a>{logout}</header>'
        f'<main id="main" tabindex="-1">{body}</main></body></html>\n'
    )


def link(root: str, query: Query, **change: str) -> str:
    params = query.params(**change)
    return f"{root}/" + (f"?{urllib.parse.urlencode(params)}" if params else "")


def percent(a: Amount) -> str:
    if math.isinf(a.fraction):
        return "used of no capacity"
    return f"{a.fraction:.0%}"


def bar(a: Amount, label: bool = True) -> str:
    """One class's bar: the numbers as text, the bar itself only a picture of them
    (`label`: name the class in it, where no row header does)."""
    width = 100.0 if math.isinf(a.fraction) else min(a.fraction, 1.0) * 100
    over = " over" if a.over else ""
    marker = (
        f' <strong class="marker">OVER CAPACITY by {a.used - a.capacity}</strong>' if a.over else ""
    )
    return (
        f'<div class="amount{over}" data-rc="{e(a.resource_class)}">'
        + (f'<span class="rc">{e(a.resource_class)}</span>' if label else "")
        + f'<span class="bar" aria-hidden="true"><span class="fill" style="width:{width:.1f}%">'
        "</span></span>"
        f'<span class="nums" data-used="{a.used}" data-reserved="{a.reserved}" '
        f'data-capacity="{a.capacity}">used {a.used} / reserved {a.reserved} / '
        f"capacity {a.capacity}</span> <span>({e(percent(a))})</span>{marker}</div>"
    )


def _hidden(query: Query, *names: str) -> str:
    return "".join(
        f'<input type="hidden" name="{n}" value="{e(getattr(query, n))}">'
        for n in names
        if getattr(query, n) and not (n == "sort" and query.sort == "name")
    )


def _field(name: str, label: str, value: str, hint: str = "", size: int = 24) -> str:
    placeholder = f' placeholder="{e(hint)}"' if hint else ""
    return (
        f'<div><label for="f-{name}">{e(label)}</label><input id="f-{name}" name="{name}" '
        f'size="{size}" value="{e(value)}"{placeholder}></div>'
    )


def filters(query: Query, root: str) -> str:
    options = "".join(
        f'<option value="{k}"{" selected" if k == query.sort else ""}>{e(v)}</option>'
        for k, v in SORTS.items()
    )
    return (
        f'<form class="filters" method="get" action="{e(root)}/" role="search" '
        'aria-label="Filter providers">'
        + _field("name", "Name contains", query.name)
        + _field("aggregate", "In aggregate (uuid)", query.aggregate)
        + _field("trait", "Has trait", query.trait, "HW_CPU_X86_AVX2")
        + f'<div><label for="f-sort">Sort by</label><select id="f-sort" name="sort">'
        f"{options}</select></div>"
        + _hidden(query, "shape")
        + '<div><button type="submit">Apply</button> '
        f'<a href="{e(root)}/">Clear filters</a></div></form>'
    )


def capacity_box(query: Query, root: str, fits: list[seams.Fit] | None, error: str | None) -> str:
    parts = [
        '<section class="box" aria-labelledby="cap-h"><h2 id="cap-h">How many more fit?</h2>',
        f'<form class="shape" method="get" action="{e(root)}/" aria-label="Capacity for a shape">',
        _field(
            "shape", "Shape (CLASS=N or CLASS:N, ...)", query.shape, "VCPU=2,MEMORY_MB=4096", 40
        ),
        _hidden(query, "name", "aggregate", "trait", "sort"),
        '<div><button type="submit">Count</button></div></form>',
    ]
    if error:
        parts.append(f'<p class="notice" role="status" id="capacity-result">{e(error)}</p>')
    elif query.shape and fits is None:
        parts.append(
            '<p class="notice" role="status" id="capacity-result">Capacity counts not '
            "available: this build has no fill function (tally capacity) plugged in.</p>"
        )
    elif query.shape and fits is not None:
        rows = "".join(
            f'<tr><th scope="row"><a href="{e(root)}/providers/{e(f.provider)}">'
            f'{e(f.name or f.provider)}</a></th><td class="num">{f.count}</td>'
            f"<td>{e(', '.join(f.limiting) or '-')}</td></tr>"
            for f in fits
        )
        parts.append(
            f'<table id="capacity-result"><caption>Room for more of {e(query.shape)}</caption>'
            '<thead><tr><th scope="col">Provider</th><th scope="col">How many more</th>'
            f'<th scope="col">Limited by</th></tr></thead><tbody>{rows}</tbody></table>'
        )
    parts.append("</section>")
    return "".join(parts)


def overview(
    view: Overview,
    query: Query,
    root: str,
    fits: list[seams.Fit] | None = None,
    shape_error: str | None = None,
) -> str:
    over = sum(1 for r in view.rows if r.over)
    body = ["<h1>Providers</h1>", filters(query, root)]
    if view.notice:
        body.append(f'<p class="notice" role="status">{e(view.notice)}</p>')
    body.append(capacity_box(query, root, fits, shape_error))
    shown = f"{len(view.rows)} of {view.matched}" if len(view.rows) < view.matched else view.matched
    body.append(
        f'<p id="count" role="status">{shown} provider{"s" if view.matched != 1 else ""}'
        f"{f', {over} OVER CAPACITY' if over else ''}.</p>"
    )
    rows = []
    for r in view.rows:
        marker = ' <strong class="marker">OVER CAPACITY</strong>' if r.over else ""
        bars = "".join(bar(a) for a in r.amounts) or '<span class="muted">no inventory</span>'
        fullest = max(r.amounts, key=lambda a: a.fraction, default=None)
        full = f"{percent(fullest)} {e(fullest.resource_class)}" if fullest else "-"
        rows.append(
            f'<tr class="provider{" over" if r.over else ""}" data-uuid="{e(r.uuid)}">'
            f'<th scope="row"><a href="{e(root)}/providers/{e(r.uuid)}">{e(r.name)}</a>{marker}'
            f'<div class="uuid">{e(r.uuid)}</div></th><td>{bars}</td><td>{full}</td></tr>'
        )
    by = SORTS[query.sort]
    body.append(
        f'<table id="providers"><caption>Providers, sorted by {e(by)}</caption><thead><tr>'
        f'<th scope="col"><a href="{e(link(root, query, sort="name"))}">Name</a></th>'
        '<th scope="col">Per resource class: used / reserved / capacity</th>'
        f'<th scope="col"><a href="{e(link(root, query, sort="fullness"))}">Fullest</a></th>'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    return "".join(body)


def _when(at: object) -> str:
    return at.isoformat(sep=" ", timespec="seconds") if isinstance(at, dt.datetime) else str(at)


def _resources(resources: Mapping[str, int]) -> str:
    return ", ".join(f"{rc} {n}" for rc, n in sorted(resources.items())) or "-"


def _since(h: Holder) -> tuple[str, str]:
    if h.since is None:
        return "-", "-"
    when = _when(h.since.time) if h.since_complete else f"on or before {_when(h.since.time)}"
    return when, h.since.request_id or "-"


def _list(root: str, key: str, values: Iterable[str]) -> str:
    items = [f'<a href="{e(root)}/?{urllib.parse.urlencode({key: v})}">{e(v)}</a>' for v in values]
    return ", ".join(items) or "none"


def provider(view: ProviderView, root: str, history_available: bool = True) -> str:
    p = view.provider
    marker = ' <strong class="marker">OVER CAPACITY</strong>' if view.over else ""

    def to(uuid: str | None, name: str | None) -> str:
        return f'<a href="{e(root)}/providers/{e(uuid)}">{e(name or uuid)}</a>' if uuid else "-"

    body = [
        f'<nav aria-label="Breadcrumb"><a href="{e(root)}/">All providers</a></nav>',
        f"<h1>{e(p.name)}{marker}</h1><dl>",
        f'<dt>UUID</dt><dd class="uuid" id="provider-uuid">{e(p.uuid)}</dd>',
        f"<dt>Generation</dt><dd>{p.generation}</dd>",
        f"<dt>Parent</dt><dd>{to(p.parent_provider_uuid, view.parent_name)}</dd>",
        f"<dt>Root</dt><dd>{to(p.root_provider_uuid, view.root_name)}</dd>",
        f"<dt>Traits</dt><dd>{_list(root, 'trait', view.traits)}</dd>",
        f"<dt>Aggregates</dt><dd>{_list(root, 'aggregate', view.aggregates)}</dd></dl>",
    ]
    inventory_rows = "".join(
        f'<tr class="{"over" if a.over else ""}"><th scope="row">{e(a.resource_class)}</th>'
        f"<td>{bar(a, label=False)}</td><td class=num>{a.total}</td>"
        f"<td class=num>{a.allocation_ratio:g}</td><td class=num>{a.free}</td>"
        f"<td class=num>{a.min_unit} / {a.max_unit} / {a.step_size}</td></tr>"
        for a in view.amounts
    )
    heads = "Class,Used / reserved / capacity,Total,Ratio,Free,Min / max / step"
    body.append(
        '<h2 id="inventory-h">Inventory and usage</h2><table id="inventory">'
        "<caption>Capacity is (total - reserved) x ratio</caption><thead><tr>"
        + "".join(f'<th scope="col">{h}</th>' for h in heads.split(","))
        + f"</tr></thead><tbody>{inventory_rows}</tbody></table>"
        if view.amounts
        else "<h2>Inventory and usage</h2><p>No inventory.</p>"
    )
    holder_rows = []
    for h in view.holders:
        since, request = _since(h)
        holder_rows.append(
            f'<tr><th scope="row" class="uuid">{e(h.uuid)}</th><td>{e(h.consumer_type)}</td>'
            f"<td>{e(h.project_id)}</td><td>{e(h.user_id)}</td><td>{e(_resources(h.resources))}"
            f"</td><td>{e(since)}</td><td class=uuid>{e(request)}</td></tr>"
        )
    note = "" if history_available else " (since and request: history not available)"
    body.append(
        f'<h2 id="consumers-h">Consumers ({len(view.holders)})</h2>'
        + (
            f'<table id="consumers"><caption>Who holds resources here{e(note)}</caption>'
            '<thead><tr><th scope="col">Consumer</th><th scope="col">Type</th>'
            '<th scope="col">Project</th><th scope="col">User</th><th scope="col">Holds here</th>'
            '<th scope="col">Since</th><th scope="col">By request</th></tr></thead>'
            f"<tbody>{''.join(holder_rows)}</tbody></table>"
            if view.holders
            else "<p>No consumer holds anything here.</p>"
        )
    )
    body.append(history(view.history))
    if len(view.tree) > 1:
        body.append(
            "<h2>Tree</h2><ul>"
            + "".join(f"<li>{to(t.uuid, t.name)}</li>" for t in view.tree)
            + "</ul>"
        )
    return "".join(body)


def history(events: list[seams.HistoryEvent] | None) -> str:
    if events is None:
        return '<h2 id="history-h">History</h2><p id="history">History not available.</p>'
    if not events:
        return '<h2 id="history-h">History</h2><p id="history">No claims recorded here.</p>'
    rows = "".join(
        f"<tr><td>{e(_when(ev.time))}</td><td>{e(ev.action)}</td>"
        f'<td class="uuid">{e(ev.consumer or "-")}</td><td>{e(_change(ev))}</td>'
        f'<td class="uuid">{e(ev.request_id or "-")}</td></tr>'
        for ev in events
    )
    return (
        '<h2 id="history-h">History</h2><table id="history"><caption>Newest first</caption>'
        '<thead><tr><th scope="col">When</th><th scope="col">What</th>'
        '<th scope="col">Consumer</th><th scope="col">Change</th>'
        f'<th scope="col">Request</th></tr></thead><tbody>{rows}</tbody></table>'
    )


def _change(ev: seams.HistoryEvent) -> str:
    """ "VCPU 2 -> 6" for an amount; the detail, compact, for anything else."""
    if ev.resource_class:
        before = "(none)" if ev.before is None else ev.before
        after = "(none)" if ev.after is None else ev.after
        return f"{ev.resource_class} {before} -> {after}"
    text = json.dumps(ev.detail, sort_keys=True, default=str) if ev.detail else ""
    return text if len(text) <= 200 else text[:199] + "..."


HINTS = {
    "noauth": "This server runs with auth_strategy = noauth: the token admin is an admin.",
    "lab": "This server runs with auth_strategy = lab: paste a lab token of an admin user "
    "(openstack --os-cloud tally-lab token issue -f value -c id).",
    "keystone": "Paste a Keystone token of a user with the admin role "
    "(openstack token issue -f value -c id).",
}


def login_form(root: str, auth_strategy: str, next_path: str = "") -> str:
    return (
        f'<form method="post" action="{e(root)}/login" aria-label="Log in">'
        '<div><label for="f-token">Token</label>'
        '<input id="f-token" name="token" type="password" autocomplete="off" required></div>'
        f'<input type="hidden" name="next" value="{e(next_path)}">'
        '<div><button type="submit">Log in</button></div></form>'
        f"<p>{e(HINTS.get(auth_strategy, ''))} The token is kept in a cookie for this "
        "page only, until the browser closes or you log out.</p>"
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
    body = f"<h1>{status} {e(title)}</h1><p>{e(detail)}</p>"
    if status in (401, 403):
        body += login_form(root, auth_strategy, next_path)
    if request_id:
        body += f'<p class="muted">Request {e(request_id)}</p>'
    return page(f"{status} {title}", body, root)
