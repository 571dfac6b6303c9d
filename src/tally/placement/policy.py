"""Authorization: upstream Placement's rule names and defaults, enforced with oslo.policy.

Every API rule points at one of a few base rules (`admin_or_service_api`, ...), as
upstream's do, so an operator's `policy.yaml` written for upstream Placement overrides
the same names here. The base rules carry the pre-Wallaby default (`role:admin`) as a
deprecated rule: with `enforce_new_defaults = false` (the legacy mode) oslo.policy ORs it
with the new default; with `true` only the new defaults (admin, service, and a project
reader on `GET /usages` for its own project; the reshaper for the service role) apply.
Every API rule is project-scoped, so a system-scoped token is refused.

Handlers name their rules as data (`POLICIES = {"GET": "placement:..."}` on each
resource class); `middleware.Authorize` asks `Policy.authorize` before the responder runs.
"""

from __future__ import annotations

from pathlib import Path

from oslo_config import cfg
from oslo_policy import policy as oslo_policy

from tally.config import Settings
from tally.placement.context import Identity
from tally.placement.error_types import Forbidden

ADMIN_OR_SERVICE = "rule:admin_or_service_api"
SERVICE = "rule:service_api"
ADMIN_OR_PROJECT_READER_OR_SERVICE = "rule:admin_or_project_reader_or_service_api"
PROJECT = ["project"]

# The pre-Wallaby default every base rule but `admin_api` falls back to in legacy mode.
# Its name is upstream's (a `rule:` string that no policy file key matches), so an
# override of `admin_api` does not silently replace the new base rules.
_LEGACY_ADMIN = oslo_policy.DeprecatedRule(
    name="rule:admin_api",
    check_str="role:admin",
    deprecated_reason="Placement's rules gained the service and reader roles and project "
    "scope; the admin-only default goes away once the new defaults are enforced.",
    deprecated_since="W",
)

# (name, check string, description, scope types, falls back to the legacy admin rule)
BASE_RULES: tuple[tuple[str, str, str, list[str] | None, bool], ...] = (
    ("admin_api", "role:admin", "The administrator.", PROJECT, False),
    ("service_api", "role:service", "Another service, such as the compute service.", PROJECT, True),
    (
        "admin_or_service_api",
        "role:admin or role:service",
        "The administrator or another service: the default of most APIs.",
        PROJECT,
        True,
    ),
    (
        "project_reader_api",
        "role:reader and project_id:%(project_id)s",
        "A reader of the project the request is about.",
        None,
        True,
    ),
    (
        "admin_or_project_reader_or_service_api",
        "role:admin or rule:project_reader_api or role:service",
        "The administrator, another service or a reader of the project asked about.",
        PROJECT,
        True,
    ),
)

# (name, check string, description, operations as "METHOD path")
API_RULES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "placement:resource_providers:list",
        ADMIN_OR_SERVICE,
        "List providers.",
        ("GET /resource_providers",),
    ),
    (
        "placement:resource_providers:create",
        ADMIN_OR_SERVICE,
        "Create a provider.",
        ("POST /resource_providers",),
    ),
    (
        "placement:resource_providers:show",
        ADMIN_OR_SERVICE,
        "Show a provider.",
        ("GET /resource_providers/{uuid}",),
    ),
    (
        "placement:resource_providers:update",
        ADMIN_OR_SERVICE,
        "Update a provider.",
        ("PUT /resource_providers/{uuid}",),
    ),
    (
        "placement:resource_providers:delete",
        ADMIN_OR_SERVICE,
        "Delete a provider.",
        ("DELETE /resource_providers/{uuid}",),
    ),
    (
        "placement:resource_classes:list",
        ADMIN_OR_SERVICE,
        "List resource classes.",
        ("GET /resource_classes",),
    ),
    (
        "placement:resource_classes:create",
        ADMIN_OR_SERVICE,
        "Create a custom resource class.",
        ("POST /resource_classes",),
    ),
    (
        "placement:resource_classes:show",
        ADMIN_OR_SERVICE,
        "Show a resource class.",
        ("GET /resource_classes/{name}",),
    ),
    (
        "placement:resource_classes:update",
        ADMIN_OR_SERVICE,
        "Create or update a custom resource class.",
        ("PUT /resource_classes/{name}",),
    ),
    (
        "placement:resource_classes:delete",
        ADMIN_OR_SERVICE,
        "Delete a custom resource class.",
        ("DELETE /resource_classes/{name}",),
    ),
    (
        "placement:resource_providers:inventories:list",
        ADMIN_OR_SERVICE,
        "List a provider's inventories.",
        ("GET /resource_providers/{uuid}/inventories",),
    ),
    (
        "placement:resource_providers:inventories:create",
        ADMIN_OR_SERVICE,
        "Add one inventory to a provider.",
        ("POST /resource_providers/{uuid}/inventories",),
    ),
    (
        "placement:resource_providers:inventories:show",
        ADMIN_OR_SERVICE,
        "Show one inventory of a provider.",
        ("GET /resource_providers/{uuid}/inventories/{resource_class}",),
    ),
    (
        "placement:resource_providers:inventories:update",
        ADMIN_OR_SERVICE,
        "Replace a provider's inventories, or update one.",
        (
            "PUT /resource_providers/{uuid}/inventories",
            "PUT /resource_providers/{uuid}/inventories/{resource_class}",
        ),
    ),
    (
        "placement:resource_providers:inventories:delete",
        ADMIN_OR_SERVICE,
        "Delete a provider's inventories, or one of them.",
        (
            "DELETE /resource_providers/{uuid}/inventories",
            "DELETE /resource_providers/{uuid}/inventories/{resource_class}",
        ),
    ),
    (
        "placement:resource_providers:aggregates:list",
        ADMIN_OR_SERVICE,
        "List a provider's aggregates.",
        ("GET /resource_providers/{uuid}/aggregates",),
    ),
    (
        "placement:resource_providers:aggregates:update",
        ADMIN_OR_SERVICE,
        "Replace a provider's aggregates.",
        ("PUT /resource_providers/{uuid}/aggregates",),
    ),
    (
        "placement:resource_providers:usages",
        ADMIN_OR_SERVICE,
        "Show a provider's usages.",
        ("GET /resource_providers/{uuid}/usages",),
    ),
    (
        "placement:usages",
        ADMIN_OR_PROJECT_READER_OR_SERVICE,
        "Show the total usages of a project (and user).",
        ("GET /usages",),
    ),
    ("placement:traits:list", ADMIN_OR_SERVICE, "List traits.", ("GET /traits",)),
    ("placement:traits:show", ADMIN_OR_SERVICE, "Show a trait.", ("GET /traits/{name}",)),
    (
        "placement:traits:update",
        ADMIN_OR_SERVICE,
        "Create a custom trait.",
        ("PUT /traits/{name}",),
    ),
    (
        "placement:traits:delete",
        ADMIN_OR_SERVICE,
        "Delete a custom trait.",
        ("DELETE /traits/{name}",),
    ),
    (
        "placement:resource_providers:traits:list",
        ADMIN_OR_SERVICE,
        "List a provider's traits.",
        ("GET /resource_providers/{uuid}/traits",),
    ),
    (
        "placement:resource_providers:traits:update",
        ADMIN_OR_SERVICE,
        "Replace a provider's traits.",
        ("PUT /resource_providers/{uuid}/traits",),
    ),
    (
        "placement:resource_providers:traits:delete",
        ADMIN_OR_SERVICE,
        "Remove every trait of a provider.",
        ("DELETE /resource_providers/{uuid}/traits",),
    ),
    (
        "placement:allocations:manage",
        ADMIN_OR_SERVICE,
        "Write the allocations of several consumers at once.",
        ("POST /allocations",),
    ),
    (
        "placement:allocations:list",
        ADMIN_OR_SERVICE,
        "List a consumer's allocations.",
        ("GET /allocations/{consumer_uuid}",),
    ),
    (
        "placement:allocations:update",
        ADMIN_OR_SERVICE,
        "Write a consumer's allocations.",
        ("PUT /allocations/{consumer_uuid}",),
    ),
    (
        "placement:allocations:delete",
        ADMIN_OR_SERVICE,
        "Delete a consumer's allocations.",
        ("DELETE /allocations/{consumer_uuid}",),
    ),
    (
        "placement:resource_providers:allocations:list",
        ADMIN_OR_SERVICE,
        "List the allocations against a provider.",
        ("GET /resource_providers/{uuid}/allocations",),
    ),
    (
        "placement:allocation_candidates:list",
        ADMIN_OR_SERVICE,
        "List allocation candidates.",
        ("GET /allocation_candidates",),
    ),
    (
        "placement:reshaper:reshape",
        SERVICE,
        "Move inventories and allocations in one step.",
        ("POST /reshaper",),
    ),
    # Tally's own API (no upstream name to keep): admin only in both modes.
    (
        "tally:history:list",
        "rule:admin_api",
        "Read the claim history: every change of allocations, inventories, providers, "
        "traits and aggregates, with the request that made it.",
        ("GET /tally/v1/history",),
    ),
    (
        "tally:allocation_candidates:why",
        "rule:admin_api",
        "Explain what a query of allocation candidates finds: each constraint, the "
        "trees it rules out, the closest misses.",
        ("GET /tally/v1/allocation_candidates/why",),
    ),
    (
        "tally:failures:list",
        "rule:admin_api",
        "Read the searches of GET /allocation_candidates that found nothing: the query, "
        "who asked and why nothing fitted.",
        ("GET /tally/v1/failures",),
    ),
    (
        "tally:amounts:list",
        "rule:admin_api",
        "Read every provider's inventories with what is used of them, in one answer.",
        ("GET /tally/v1/amounts",),
    ),
    (
        "tally:sandboxes:list",
        "rule:admin_api",
        "List the what-if sandboxes not expired.",
        ("GET /tally/v1/sandboxes",),
    ),
    (
        "tally:sandboxes:create",
        "rule:admin_api",
        "Make a what-if sandbox: a copy-on-write overlay of the live cloud.",
        ("POST /tally/v1/sandboxes",),
    ),
    (
        "tally:sandboxes:show",
        "rule:admin_api",
        "Read a sandbox and its diff against the live cloud.",
        ("GET /tally/v1/sandboxes/{sandbox}", "GET /tally/v1/sandboxes/{sandbox}/diff"),
    ),
    (
        "tally:sandboxes:delete",
        "rule:admin_api",
        "Delete a sandbox (the live cloud is left as it is).",
        ("DELETE /tally/v1/sandboxes/{sandbox}",),
    ),
    (
        "tally:sandboxes:change",
        "rule:admin_api",
        "Try changes in a sandbox: moves, resizes, boots, inventory changes, removals, "
        "disabled and drained hosts.",
        ("POST /tally/v1/sandboxes/{sandbox}/changes",),
    ),
    (
        "tally:sandboxes:read",
        "rule:admin_api",
        "Read inside a sandbox: allocation candidates, why, usages, amounts.",
        (
            "GET /tally/v1/sandboxes/{sandbox}/allocation_candidates",
            "GET /tally/v1/sandboxes/{sandbox}/allocation_candidates/why",
            "GET /tally/v1/sandboxes/{sandbox}/resource_providers/{uuid}/usages",
            "GET /tally/v1/sandboxes/{sandbox}/amounts",
        ),
    ),
    (
        "tally:sandboxes:commit",
        "rule:admin_api",
        "Apply a sandbox's changes to the live cloud in one transaction, if nothing they "
        "read has moved.",
        ("POST /tally/v1/sandboxes/{sandbox}/commit",),
    ),
)

# Rules of what Tally serves outside the Placement app's route table (the operator
# page, tally.ui), in API_RULES' shape: every API_RULES rule names a route of it.
TALLY_RULES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "tally:ui:view",
        "rule:admin_api",
        "Read the operator page: providers, usage, consumers, history, what-if sandboxes.",
        (
            "GET /tally/ui",
            "GET /tally/ui/providers/{uuid}",
            "GET /tally/ui/sandboxes",
            "GET /tally/ui/sandboxes/{sandbox}",
        ),
    ),
)


def default_rules() -> list[oslo_policy.RuleDefault]:
    """Fresh RuleDefault objects (oslo.policy mutates what it is given)."""
    rules: list[oslo_policy.RuleDefault] = [
        oslo_policy.RuleDefault(
            name,
            check,
            description=description,
            scope_types=scopes,
            deprecated_rule=_LEGACY_ADMIN if legacy else None,
        )
        for name, check, description, scopes, legacy in BASE_RULES
    ]
    for name, check, description, operations in API_RULES + TALLY_RULES:
        ops = [dict(zip(("method", "path"), op.split(" ", 1), strict=True)) for op in operations]
        rules.append(
            oslo_policy.DocumentedRuleDefault(
                name, check, description, ops, scope_types=list(PROJECT)
            )
        )
    return rules


def rule_names() -> list[str]:
    return [r[0] for r in BASE_RULES] + [r[0] for r in API_RULES + TALLY_RULES]


class _Conf(cfg.ConfigOpts):
    """oslo.policy searches `~/` and `/etc/` for a relative `policy_file`; Tally reads
    only the file it was told about (an absolute path, resolved by `tally.config`)."""

    def find_file(self, name: str) -> str | None:
        path = Path(name)
        return str(path) if path.is_absolute() and path.exists() else None


class Policy:
    """The enforcer of one app: the registered defaults, the `enforce_new_defaults`
    setting and the operator's `policy_file` (re-read when it changes, as upstream)."""

    def __init__(self, settings: Settings) -> None:
        conf = _Conf()
        conf([], project="tally", default_config_files=[], default_config_dirs=[])
        enforcer = oslo_policy.Enforcer(conf)
        conf.set_override("enforce_new_defaults", settings.enforce_new_defaults, "oslo_policy")
        conf.set_override("policy_dirs", [], "oslo_policy")
        if "enforce_scope" in conf.oslo_policy:  # oslo.policy before 5 could switch it off
            conf.set_override("enforce_scope", True, "oslo_policy")
        policy_file = settings.policy_file
        if policy_file:
            path = Path(policy_file).expanduser().resolve()
            if not path.is_file():
                raise ValueError(f"policy_file {policy_file!r} does not exist")
            enforcer.policy_file = str(path)
        else:
            enforcer.policy_file = ""
        # Default-change warnings would fire for every rule in legacy mode (upstream
        # silences them the same way).
        enforcer.suppress_default_change_warnings = True
        enforcer.register_defaults(default_rules())
        enforcer.load_rules()
        self.enforcer = enforcer
        self.path = enforcer.policy_file
        # Decisions by (rules file version, rule, caller, target): a decision is a
        # function of those alone, and oslo.policy's own check costs about a tenth
        # of a small write's time. Cleared when the file changes or it grows large.
        self._decided: dict[tuple, bool] = {}
        self._stamp: float | None = None

    def authorize(self, identity: Identity, rule: str, target: dict | None = None) -> None:
        """Raise Forbidden, with upstream's message, unless `rule` allows `identity`."""
        if target is None:
            target = {"project_id": identity.project_id, "user_id": identity.user_id}
        stamp = _mtime(self.path)
        if stamp != self._stamp or len(self._decided) > 4096:
            self._decided, self._stamp = {}, stamp
        key = (rule, identity, tuple(sorted(target.items())))
        try:
            allowed = self._decided.get(key)
        except TypeError:  # a target value that cannot be a key: decide each time
            key, allowed = None, None
        if allowed is None:
            allowed = self._decide(identity, rule, target)
            if key is not None:
                self._decided[key] = allowed
        if not allowed:
            raise Forbidden(f"Policy does not allow {rule} to be performed.")

    def _decide(self, identity: Identity, rule: str, target: dict) -> bool:
        creds = {
            "user_id": identity.user_id,
            "project_id": identity.project_id,
            "domain_id": identity.domain_id,
            "roles": list(identity.roles),
            "system_scope": identity.system_scope,
        }
        try:
            return bool(self.enforcer.authorize(rule, target, creds))
        except oslo_policy.InvalidScope:
            return False


def _mtime(path: str) -> float | None:
    """When the policy file last changed (None: no file)."""
    if not path:
        return None
    try:
        return Path(path).stat().st_mtime
    except OSError:
        return None
