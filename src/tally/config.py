"""Settings: one table of rows, read from defaults, a TOML file, an upstream
placement.conf, and the environment (in that order; later wins).

Every setting is a `Setting` row in `SETTINGS`; `tally serve --help-settings`
prints the table, and the docs test checks each row is documented.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from pathlib import Path
from typing import Any

from tally import placement_conf as upstream_conf


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str
    env: str
    placement_conf: tuple[str, str] | None = None  # (section, option) in placement.conf
    choices: tuple[str, ...] = ()
    least: int | None = None  # an integer's bounds, checked when read
    most: int | None = None


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "database_url",
        "",
        "SQLAlchemy URL; empty means a SQLite file at `data_dir/tally.sqlite`.",
        "TALLY_DATABASE_URL",
        ("placement_database", "connection"),
    ),
    Setting(
        "database_max_pool_size",
        10,
        "Connections each serving process keeps open to a PostgreSQL or MySQL database "
        "(the embedded SQLite keeps its own 8); with `database_max_overflow`, the most it "
        "opens (docs/deploy.md: the connection budget).",
        "TALLY_DATABASE_MAX_POOL_SIZE",
        ("placement_database", "max_pool_size"),
        least=1,
    ),
    Setting(
        "database_max_overflow",
        20,
        "Connections a serving process may open beyond `database_max_pool_size` when "
        "busy, closed again when returned.",
        "TALLY_DATABASE_MAX_OVERFLOW",
        ("placement_database", "max_overflow"),
        least=0,
    ),
    Setting(
        "database_pool_timeout",
        30,
        "Seconds a request waits for a free connection of its process's pool before it "
        "answers 503 (on MySQL, within the request's read timeout).",
        "TALLY_DATABASE_POOL_TIMEOUT",
        ("placement_database", "pool_timeout"),
        least=1,
    ),
    Setting(
        "placement_conf",
        "",
        "Path of an upstream placement.conf: its matching options are read, and with "
        "`auth_strategy = keystone` its `[keystone_authtoken]` section configures auth_token.",
        "TALLY_PLACEMENT_CONF",
    ),
    Setting(
        "data_dir", "./tally-data", "Folder of the embedded SQLite database.", "TALLY_DATA_DIR"
    ),
    Setting(
        "import_max_rows",
        1000000,
        "Most rows `tally db import` (and `tally db check`) reads of one table, 1,000 at a "
        "time; a source table with more is refused in one line naming this setting; 0: no "
        "bound.",
        "TALLY_IMPORT_MAX_ROWS",
    ),
    Setting(
        "auth_strategy",
        "noauth",
        "`noauth` (token `user[:project]`, user `admin` is an admin) or `keystone`; "
        "`lab`: only tokens of the lab's identity service (see `lab`).",
        "TALLY_AUTH_STRATEGY",
        ("api", "auth_strategy"),
        ("noauth", "keystone", "lab"),
    ),
    Setting(
        "noauth_allow_remote",
        False,
        "Let `tally serve` listen on a non-loopback address with `auth_strategy = noauth` "
        "(anyone who can reach it is then an admin). Off: it refuses to start.",
        "TALLY_NOAUTH_ALLOW_REMOTE",
    ),
    Setting(
        "enforce_new_defaults",
        False,
        "Enforce only the new (secure RBAC) policy defaults: admin, service, a project "
        "reader on GET /usages of its project, the service role on POST /reshaper. Off: "
        "the legacy admin-only default is ORed in, as upstream's deprecated rules.",
        "TALLY_ENFORCE_NEW_DEFAULTS",
        ("oslo_policy", "enforce_new_defaults"),
    ),
    Setting(
        "policy_file",
        "",
        "A policy.yaml overriding rules by their upstream names (re-read when it changes); "
        "in placement.conf, relative to the file's folder, and `policy.yaml` beside it is "
        "read when present, as upstream does.",
        "TALLY_POLICY_FILE",
        ("oslo_policy", "policy_file"),
    ),
    Setting(
        "cors_allowed_origin",
        (),
        "Origins (comma-separated; `*` for any) that may call the API from a browser; "
        "empty: CORS off.",
        "TALLY_CORS_ALLOWED_ORIGIN",
        ("cors", "allowed_origin"),
    ),
    Setting(
        "cors_allow_headers",
        (
            "X-Auth-Token",
            "X-Openstack-Request-Id",
            "X-Identity-Status",
            "X-Roles",
            "X-Service-Catalog",
            "X-User-Id",
            "X-Tenant-Id",
            "OpenStack-API-Version",
        ),
        "Request headers a CORS request may use besides the simple ones (comma-separated).",
        "TALLY_CORS_ALLOW_HEADERS",
        ("cors", "allow_headers"),
    ),
    Setting(
        "cors_allow_methods",
        ("GET", "PUT", "POST", "DELETE", "PATCH"),
        "Methods a CORS request may use.",
        "TALLY_CORS_ALLOW_METHODS",
        ("cors", "allow_methods"),
    ),
    Setting(
        "cors_expose_headers",
        (
            "X-Auth-Token",
            "X-Openstack-Request-Id",
            "X-Subject-Token",
            "X-Service-Token",
            "OpenStack-API-Version",
        ),
        "Response headers a browser may show to the calling script.",
        "TALLY_CORS_EXPOSE_HEADERS",
        ("cors", "expose_headers"),
    ),
    Setting(
        "cors_allow_credentials",
        True,
        "Whether CORS requests may carry credentials.",
        "TALLY_CORS_ALLOW_CREDENTIALS",
        ("cors", "allow_credentials"),
    ),
    Setting(
        "cors_max_age",
        3600,
        "Seconds a browser may cache a preflight answer.",
        "TALLY_CORS_MAX_AGE",
        ("cors", "max_age"),
    ),
    Setting(
        "over_capacity",
        "refuse",
        "`refuse`: an inventory change below current usage is a 409 (our spec). "
        "`allow`: write it and log a warning (upstream Placement's behaviour).",
        "TALLY_OVER_CAPACITY",
        choices=("refuse", "allow"),
    ),
    Setting(
        "allocation_conflict_retry_count",
        10,
        "How many times an allocation write retries its own provider-generation race.",
        "TALLY_ALLOCATION_CONFLICT_RETRY_COUNT",
        ("placement", "allocation_conflict_retry_count"),
    ),
    Setting(
        "history",
        True,
        "Record every change of allocations, inventories, providers, traits and aggregates "
        "in the claim history (`GET /tally/v1/history`, `tally history`), in the write's "
        "own transaction, with the request id, global request id, user and project.",
        "TALLY_HISTORY",
    ),
    Setting(
        "history_keep_days",
        90,
        "Claim history older than this many days is pruned (in small batches, in a thread "
        "of its own, never inside a write); 0: no age limit.",
        "TALLY_HISTORY_KEEP_DAYS",
    ),
    Setting(
        "history_keep_rows",
        1000000,
        "At most this many claim history rows are kept (the newest; pruned as for "
        "`history_keep_days`); 0: no limit.",
        "TALLY_HISTORY_KEEP_ROWS",
    ),
    Setting(
        "history_prune_seconds",
        60,
        "At most one pass of the claim history's pruning per this many seconds (a pass "
        "starts after a write request, in a thread of its own).",
        "TALLY_HISTORY_PRUNE_SECONDS",
    ),
    Setting(
        "failures",
        True,
        "Record every GET /allocation_candidates that found nothing (`GET /tally/v1/failures`, "
        "`tally failures`, `tally why`): the query, microversion, request ids, user, project "
        "and the verdict, written by a thread of its own, off the request's path.",
        "TALLY_FAILURES",
    ),
    Setting(
        "failures_keep_days",
        30,
        "Failed searches older than this many days are pruned (in small batches, by the "
        "failures' writer thread, at most once per `history_prune_seconds`); 0: no age limit.",
        "TALLY_FAILURES_KEEP_DAYS",
    ),
    Setting(
        "failures_keep_rows",
        100000,
        "At most this many failed searches are kept (the newest; pruned as for "
        "`failures_keep_days`); 0: no limit.",
        "TALLY_FAILURES_KEEP_ROWS",
    ),
    Setting(
        "failures_queue",
        1000,
        "Failed searches waiting for the writer thread, at most; past it a record is dropped "
        "(counted, and logged once a minute) rather than slowing the request.",
        "TALLY_FAILURES_QUEUE",
    ),
    Setting("host", "127.0.0.1", "Address `tally serve` listens on.", "TALLY_HOST"),
    Setting(
        "port", 8778, "Port `tally serve` listens on (1-65535).", "TALLY_PORT", least=1, most=65535
    ),
    Setting(
        "workers",
        1,
        "Worker processes of `tally serve` (sharing one socket; at least 1).",
        "TALLY_WORKERS",
        least=1,
    ),
    Setting(
        "log_level",
        "INFO",
        "Log level of the service (a placement.conf's `[DEFAULT] debug = true`: DEBUG).",
        "TALLY_LOG_LEVEL",
    ),
    Setting(
        "log_file",
        "",
        "Write the log to this file instead of stderr (in `log_dir` when relative).",
        "TALLY_LOG_FILE",
        ("DEFAULT", "log_file"),
    ),
    Setting(
        "log_dir",
        "",
        "Folder of `log_file` (alone: the log goes to `tally.log` there), as oslo.log's.",
        "TALLY_LOG_DIR",
        ("DEFAULT", "log_dir"),
    ),
    Setting(
        "metrics_max_providers",
        100,
        "`GET /metrics` (admins only) reports capacity, reserved and used per class of at "
        "most this many providers (the first by id), read when scraped; 0: none.",
        "TALLY_METRICS_MAX_PROVIDERS",
    ),
    Setting(
        "capacity_shapes",
        (),
        "Shapes whose count of how many more fit `GET /metrics` reports (as `tally "
        "capacity`), comma-separated: `flavor:NAME` (a flavor of the lab compute) or "
        "classes joined by `+`, like `VCPU=4+MEMORY_MB=8192`; empty: none.",
        "TALLY_CAPACITY_SHAPES",
    ),
    Setting(
        "capacity_cache_seconds",
        5,
        "Seconds a worker reuses the counts of `capacity_shapes` between scrapes; 0: "
        "count on every scrape.",
        "TALLY_CAPACITY_CACHE_SECONDS",
    ),
    Setting(
        "max_body_bytes",
        1048576,
        "Largest request body accepted; larger bodies get 413.",
        "TALLY_MAX_BODY_BYTES",
    ),
    Setting(
        "max_query_bytes",
        8000,
        "Longest query string accepted; longer ones get 414. (`tally serve` also caps the "
        "whole request line at 8190 bytes.)",
        "TALLY_MAX_QUERY_BYTES",
    ),
    Setting(
        "max_allocation_candidates",
        -1,
        "Most allocation candidates one GET /allocation_candidates generates before "
        "`limit` applies; -1: no cap (upstream's default).",
        "TALLY_MAX_ALLOCATION_CANDIDATES",
        ("placement", "max_allocation_candidates"),
    ),
    Setting(
        "candidates_answer_budget",
        250000,
        "Most work one GET /allocation_candidates may do, counted in candidates made and "
        "combinations of providers tried on the way (whether they fit or not); a request "
        "that would do more is refused 400 naming this setting, whatever the answer's size "
        "(`limit` stops the search early and often stays under it); -1: no bound.",
        "TALLY_CANDIDATES_ANSWER_BUDGET",
    ),
    Setting(
        "candidates_search_seconds",
        10,
        "Seconds one GET /allocation_candidates may search before it stops with 503 "
        "naming this setting (the last guard, behind `candidates_answer_budget`); 0: no "
        "deadline.",
        "TALLY_CANDIDATES_SEARCH_SECONDS",
    ),
    Setting(
        "allocation_candidates_generation_strategy",
        "depth-first",
        "Order in which candidates are generated across trees: `depth-first` (all of one "
        "tree, then the next) or `breadth-first` (one per tree in turn: fair when "
        "max_allocation_candidates cuts the list).",
        "TALLY_ALLOCATION_CANDIDATES_GENERATION_STRATEGY",
        ("placement", "allocation_candidates_generation_strategy"),
        ("depth-first", "breadth-first"),
    ),
    Setting(
        "candidates_index_max_mb",
        2048,
        "Most memory (MiB) the in-memory allocation candidates index of one worker may "
        "take; past it the worker searches the database instead (a log line says so). "
        "0: no index.",
        "TALLY_CANDIDATES_INDEX_MAX_MB",
    ),
    Setting(
        "sandbox_ttl_seconds",
        3600,
        "Longest time (seconds) a what-if sandbox (POST /tally/v1/sandboxes) lives; a "
        "request may ask for less. After it the sandbox is gone (404).",
        "TALLY_SANDBOX_TTL_SECONDS",
    ),
    Setting(
        "sandbox_max_mb",
        64,
        "Most memory (MiB) the overlay of one what-if sandbox may take in a worker; "
        "changes that would take it past are refused (507), none of them kept.",
        "TALLY_SANDBOX_MAX_MB",
    ),
    Setting(
        "randomize_allocation_candidates",
        False,
        "With `limit`, return a random sample of the candidates instead of the first ones.",
        "TALLY_RANDOMIZE_ALLOCATION_CANDIDATES",
        ("placement", "randomize_allocation_candidates"),
    ),
    # The lab cloud (tally/compute, tally/identity, composed by tally.serve.compose).
    Setting(
        "lab",
        "auto",
        "Serve the lab cloud beside Placement: compute under /compute/v2.1, identity under "
        "/identity/v3. `auto`: on with a SQLite database (the embedded mode), off with "
        "PostgreSQL/MySQL (a Placement-only deployment); `on`; `off`.",
        "TALLY_LAB",
        choices=("auto", "on", "off"),
    ),
    Setting(
        "lab_users",
        "admin:admin:admin:admin",
        "Users of the lab identity: `user:password:project:role+role`, several separated "
        "by commas. With `auth_strategy = noauth` Placement also accepts their tokens.",
        "TALLY_LAB_USERS",
    ),
    Setting(
        "lab_placement_url",
        "",
        "Placement the lab compute claims through: empty for the one in this process, or "
        "the URL of another (upstream) Placement, reached with `lab_placement_token`.",
        "TALLY_LAB_PLACEMENT_URL",
    ),
    Setting(
        "lab_placement_token",
        "admin",
        "x-auth-token the lab compute sends to a `lab_placement_url` (its noauth admin).",
        "TALLY_LAB_PLACEMENT_TOKEN",
    ),
    Setting(
        "lab_step_seconds",
        2,
        "Every N seconds in-flight lab migrations advance one state by themselves; "
        "0: only `tally lab step` advances them.",
        "TALLY_LAB_STEP_SECONDS",
    ),
    Setting(
        "lab_tracker_seconds",
        60,
        "Every N seconds each lab compute host reports its inventory to Placement (the "
        "resource tracker, rewriting `reserved` from the host's configuration); 0: only "
        "`tally lab tracker` and host changes run it.",
        "TALLY_LAB_TRACKER_SECONDS",
    ),
    Setting(
        "lab_compute_max_version",
        "2.96",
        "Newest compute microversion the lab answers with, to stand in for an older Nova: "
        "its version documents advertise it, `latest` means it, a request above it gets "
        "406, and responses carry only what Nova had at the version negotiated (2.1 .. "
        "2.96; a string in TOML).",
        "TALLY_LAB_COMPUTE_MAX_VERSION",
        choices=tuple(f"2.{n}" for n in range(1, 97)),
    ),
)

_BY_NAME = {s.name: s for s in SETTINGS}


@dataclasses.dataclass(frozen=True)
class Settings:
    """Resolved settings. Build with `load_settings()` or `Settings.of(**overrides)`."""

    values: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    @classmethod
    def of(cls, **overrides: Any) -> Settings:
        values = {s.name: s.default for s in SETTINGS}
        for name, value in overrides.items():
            values[name] = _coerce(name, value)
        return cls(values)

    @property
    def database(self) -> str:
        if self.values["database_url"]:
            return self.values["database_url"]
        data_dir = Path(self.values["data_dir"])
        return f"sqlite:///{data_dir / 'tally.sqlite'}"


def _coerce(name: str, value: Any) -> Any:
    if name not in _BY_NAME:
        raise ValueError(f"unknown setting {name!r}")
    setting = _BY_NAME[name]
    if isinstance(setting.default, bool):
        return _bool(value)
    if isinstance(setting.default, tuple):
        items = value.split(",") if isinstance(value, str) else value
        return tuple(str(item).strip() for item in items if str(item).strip())
    if isinstance(setting.default, int):
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"setting {name} must be an integer, not {value!r}") from None
        return _in_bounds(setting, number)
    value = str(value)
    if setting.choices and value not in setting.choices:
        raise ValueError(f"setting {name} must be one of {', '.join(setting.choices)}: {value!r}")
    return value


def _in_bounds(setting: Setting, number: int) -> int:
    """`number`, or ValueError naming the setting and its bounds."""
    low, high = setting.least, setting.most
    if (low is None or number >= low) and (high is None or number <= high):
        return number
    if high is None:
        bounds = f"at least {low}"
    elif low is None:
        bounds = f"at most {high}"
    else:
        bounds = f"from {low} to {high}"
    raise ValueError(f"setting {setting.name} must be {bounds}, not {number}")


def read_placement_conf(path: str | os.PathLike) -> dict[str, Any]:
    """The options of an upstream placement.conf that map to our settings."""
    conf = upstream_conf.read(path)
    found: dict[str, Any] = {}
    for setting in SETTINGS:
        if setting.placement_conf is None:
            continue
        value = conf.get(*setting.placement_conf)
        if value is not None:
            if setting.name == "auth_strategy" and value == "noauth2":
                value = "noauth"
            found[setting.name] = value
    if _bool(conf.get(upstream_conf.DEFAULT, "debug") or ""):
        found["log_level"] = "DEBUG"
    # As oslo.policy does for placement.conf: the policy file is found beside it.
    folder = Path(path).resolve().parent
    if "policy_file" in found or (folder / "policy.yaml").is_file():
        found["policy_file"] = str(folder / found.get("policy_file", "policy.yaml"))
    return found


# placement.conf options read by something other than a setting row
READ_ELSEWHERE = {("DEFAULT", "debug")}
READ_WHOLE = ("keystone_authtoken",)  # auth_token reads its section itself


def unused_placement_options(path: str | os.PathLike) -> list[str]:
    """`[section] option` of a placement.conf that Tally does not read, for a warning."""
    used = {s.placement_conf for s in SETTINGS if s.placement_conf} | READ_ELSEWHERE
    return [
        f"[{section}] {option}"
        for section, option in sorted(
            upstream_conf.read(path).options(), key=lambda so: (so[0] != "DEFAULT", so)
        )
        if section not in READ_WHOLE and (section, option) not in used
    ]


def load_settings(
    config_file: str | None = None,
    placement_conf: str | None = None,
    environ: dict[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    environ = dict(os.environ if environ is None else environ)
    values: dict[str, Any] = {}
    config_file = config_file or environ.get("TALLY_CONFIG")
    if config_file:
        with open(config_file, "rb") as f:
            data = tomllib.load(f)
        values.update(data.get("tally", data))
    placement_conf = placement_conf or environ.get("TALLY_PLACEMENT_CONF")
    if placement_conf:
        values.update(read_placement_conf(placement_conf))
        values["placement_conf"] = placement_conf
    for setting in SETTINGS:
        if setting.env in environ:
            values[setting.name] = environ[setting.env]
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Settings.of(**values)
