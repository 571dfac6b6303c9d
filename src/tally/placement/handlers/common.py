"""Small helpers every handler uses: body and query-string reading, validated
against the schema the request's route takes at its microversion (the one
table, `schemas.table`), answers shaped by the same table's answer rows,
microversion gates, last-modified headers and links."""

from __future__ import annotations

import datetime as dt
import email.utils
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import falcon
import jsonschema
import jsonschema_rs

from tally.placement import errors as codes
from tally.placement.error_types import (
    BadRequest,
    MethodNotAllowed,
    NotFound,
    UnsupportedMediaType,
)
from tally.placement.microversion import MAX_VERSION
from tally.placement.schemas import domain, patterns
from tally.placement.schemas.answer_schemas import Fit, fitter
from tally.placement.schemas.domain import is_uuid_like
from tally.placement.schemas.operation import Operation
from tally.placement.schemas.table import OPERATIONS

_FORMAT_CHECKER = jsonschema.FormatChecker()


@_FORMAT_CHECKER.checks("uuid")
def _is_uuid(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    return is_uuid_like(instance)


# Tests set it: every body is then judged by both validators, which must agree.
CROSS_CHECK = False


class _Validators(NamedTuple):
    schema: dict
    fast: Any  # jsonschema_rs: says valid or not, in microseconds
    full: Any  # jsonschema: the error message Placement's clients know


_VALIDATORS: dict[int, _Validators] = {}


def _validators(schema: dict) -> _Validators:
    """One checked pair of validators per schema object (`jsonschema.validate`
    re-checks the schema against its metaschema on every call, which costs more
    than validating)."""
    cached = _VALIDATORS.get(id(schema))
    if cached is None or cached.schema is not schema:
        cls = patterns.validator_class(jsonschema.validators.validator_for(schema))
        cls.check_schema(schema)
        if len(_VALIDATORS) > 1000:
            _VALIDATORS.clear()
        fast = jsonschema_rs.validator_for(
            schema, formats={"uuid": is_uuid_like}, validate_formats=True
        )
        cached = _Validators(schema, fast, cls(schema, format_checker=_FORMAT_CHECKER))
        _VALIDATORS[id(schema)] = cached
    return cached


def validate(data: Any, schema: dict, prefix: str = "JSON does not validate") -> Any:
    """400 unless `data` matches `schema`; else `data` with its uuids in
    canonical form (`domain.canonical`). A valid body costs the fast validator
    only (a tenth of a claim's time went to jsonschema); an invalid one is
    judged again by jsonschema, whose words the message uses."""
    validators = _validators(schema)
    valid = validators.fast.is_valid(data)
    if valid and not CROSS_CHECK:
        return domain.canonical(data, schema)
    try:
        error = jsonschema.exceptions.best_match(validators.full.iter_errors(data))
        if CROSS_CHECK and valid != (error is None):
            raise AssertionError(f"validators disagree on {data!r}: {error}")
        if error is not None:
            raise error
        if not valid:  # the fast validator decides; the full one only words it
            raise BadRequest(f"{prefix}: the document does not match its schema")
    except jsonschema.ValidationError as exc:
        # Clients (and upstream's tests) match "Failed validating '<keyword>' in schema[...]".
        # As jsonschema's own text, the value's place follows: "On instance['total']".
        where = "".join(f"[{p!r}]" for p in list(exc.relative_schema_path)[:-1])
        field = "".join(f"[{p!r}]" for p in exc.absolute_path)
        raise BadRequest(
            f"{prefix}: {exc.message}. Failed validating {exc.validator!r} in schema{where}"
            + (f". On instance{field}" if field else "")
        ) from None
    return domain.canonical(data, schema)


def read_json(req: falcon.Request) -> Any:
    """The request body as JSON within the input domain (`schemas.domain`), not
    yet validated (`read_body` validates it).

    415 unless the body is `application/json`; 400 for malformed JSON.
    """
    media_type = (req.content_type or "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise UnsupportedMediaType(
            f"The media type {req.content_type or 'None'} is not supported, use application/json"
        )
    return domain.parse_json(req.bounded_stream.read())


def operation(req: falcon.Request) -> Operation:
    """What the request's route reads and answers (`schemas.table`)."""
    return OPERATIONS[(req.method, req.uri_template)]


def read_body(req: falcon.Request) -> Any:
    """The request body (`read_json`) validated against the schema its route takes
    at its microversion, with its uuids in canonical form: 400 naming the field."""
    return checked_body(req, read_json(req))


def checked_body(req: falcon.Request, data: Any) -> Any:
    """`data`, a body read with `read_json`, validated as `read_body` validates."""
    schema = operation(req).body_at(req.context.version)
    if schema is None:
        raise LookupError(f"{req.method} {req.uri_template} takes no body")
    return validate(data, schema)


def read_query(req: falcon.Request) -> dict[str, list[str]]:
    """The query parameters (`query`), validated against the schema the route
    takes at its microversion, uuids in canonical form."""
    params = query(req)
    checked_query(req, params)
    return params


def checked_query(req: falcon.Request, params: dict[str, list[str]]) -> None:
    """Validate parameters read with `query` as `read_query` does (in place)."""
    schema = operation(req).query_at(req.context.version)
    if schema is None:
        raise LookupError(f"{req.method} {req.uri_template} reads no query string")
    # (The last value of each key is validated; every value of a uuid is made canonical.)
    validate({k: v[-1] for k, v in params.items()}, schema, "Invalid query string parameters")
    properties = schema.get("properties", {})
    for key, values in params.items():
        params[key] = [domain.canonical(value, properties.get(key, {})) for value in values]


def checked_path(req: falcon.Request, **params: str) -> None:
    """400 unless the path parameters match the route's `path` schemas."""
    validate(params, operation(req).path_schema)


def answer(req: falcon.Request, body: Any, status: int = 200) -> Any:
    """`body`, written with every field the newest microversion shows, as the
    route's answer row for `status` shows it at the request's microversion (the
    fields of that row's schema, in its order: `answer_schemas.fitter`)."""
    return _fit(req.method, req.uri_template, status, tuple(req.context.version))(body)


@functools.lru_cache(maxsize=512)
def _fit(method: str, route: str, status: int, version: tuple[int, int]) -> Fit:
    """The fitter of that answer row; none (the body as written) when the row is the
    newest microversion's, which the handler writes whole."""
    rows = OPERATIONS[(method, route)]
    schema = rows.answers_at(version)[status]
    if schema == rows.answers_at(MAX_VERSION).get(status, schema):
        return fitter(None)
    return fitter(schema)


def since(min_version: str, max_version: str | None = None, status: int = 404) -> Callable:
    """Gate a responder to a microversion range; outside it the route answers as
    if the method did not exist (404 by default, or 405)."""
    low = tuple(int(p) for p in min_version.split("."))
    high = tuple(int(p) for p in max_version.split(".")) if max_version else None

    def decorator(responder: Callable) -> Callable:
        @functools.wraps(responder)
        def gated(self, req: falcon.Request, resp: falcon.Response, **params: Any) -> Any:
            version = req.context.version
            if version < low or (high is not None and version > high):
                if status == 405:
                    raise MethodNotAllowed(
                        f"The method {req.method} is not allowed for this resource."
                    )
                raise NotFound("The resource could not be found.")
            return responder(self, req, resp, **params)

        # Read by middleware.Authorize: outside the range the responder answers
        # before any policy check, as upstream's version gate does.
        gated.version_gate = lambda v: v >= low and (high is None or v <= high)
        return gated

    return decorator


def http_date(when: dt.datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return email.utils.format_datetime(when.astimezone(dt.UTC), usegmt=True)


CACHE_HEADERS = (1, 15)  # last-modified and cache-control on answers


def cache_headers(req: falcon.Request, resp: falcon.Response, *stamps: dt.datetime | None) -> None:
    """From 1.15: `last-modified` (the newest of `stamps`, or now) and `cache-control`."""
    if req.context.version < CACHE_HEADERS:
        return
    known = [s for s in stamps if s is not None]
    resp.set_header("last-modified", http_date(max(known) if known else utcnow()))
    resp.set_header("cache-control", "no-cache")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)


def url(req: falcon.Request, path: str) -> str:
    """A link relative to where the service is mounted (SCRIPT_NAME)."""
    return f"{req.root_path}{path}"


def location(req: falcon.Request, path: str) -> str:
    """A `Location` header: absolute, as upstream sends it (a client behind a path
    prefix, like osc-placement's keystoneauth, would otherwise add the prefix twice)."""
    return f"{req.prefix}{path}"


def query(req: falcon.Request) -> dict[str, list[str]]:
    """Query parameters as lists of values (a key may repeat)."""
    found: dict[str, list[str]] = {}
    for key, value in falcon.uri.parse_query_string(
        req.query_string, keep_blank=True, csv=False
    ).items():
        found[key] = value if isinstance(value, list) else [value]
    return found


def single(params: dict[str, list[str]], name: str) -> str | None:
    """The one value of a query parameter that may not repeat (400 if it does)."""
    values = params.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise BadRequest(
            f"Query parameter {name!r} may only be given once.",
            code=codes.ILLEGAL_DUPLICATE_QUERYPARAM,
        )
    return values[0]
