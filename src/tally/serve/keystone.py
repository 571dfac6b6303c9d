"""`auth_strategy = keystone`: keystonemiddleware's auth_token in front of everything,
configured by the `[keystone_authtoken]` section of the operator's placement.conf.

Settings auth_token could not serve with (no placement.conf, no auth plugin, a plugin
missing its options) are refused before anything is served, in one line
(`UnsafeSettings`): without them it would start and answer 500 to every request.

auth_token runs with `delay_auth_decision` (the version document stays open, and
Placement answers 401 in its own error body). When Keystone cannot be asked (down,
timing out, answering 5xx), auth_token then only marks the token invalid; as upstream
answers 503 there, `KeystoneFront` says so to the apps in the request's environ
(`KEYSTONE_UNREACHABLE`) and Placement answers 503 with `retry-after`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from tally import placement_conf as upstream_conf
from tally.config import Settings
from tally.placement.middleware import KEYSTONE_UNREACHABLE
from tally.serve.edge import UnsafeSettings

SECTION = "keystone_authtoken"
# Why the token being validated in this context could not be (None: it could).
_unreachable: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "keystone_unreachable", default=None
)


def auth_token_front(app: Callable, settings: Settings) -> Callable:
    """auth_token in front of `app`; UnsafeSettings when it could validate no token."""
    try:
        from keystonemiddleware import auth_token  # the [keystone] extra
    except ImportError:
        from tally.install import hint

        raise UnsafeSettings(
            f"auth_strategy = keystone needs keystonemiddleware: {hint('keystone')}."
        ) from None
    if not settings.placement_conf:
        raise UnsafeSettings(
            "auth_strategy = keystone needs an upstream placement.conf (setting "
            "placement_conf, TALLY_PLACEMENT_CONF) whose [keystone_authtoken] section "
            "configures auth_token: none is set, so no token could be validated."
        )
    path = settings.placement_conf
    conf = upstream_conf.read(path)
    group = conf.get(SECTION, "auth_section") or SECTION
    if not conf.get(group, "auth_type"):
        raise UnsafeSettings(
            f"auth_strategy = keystone: [{group}] of {path} sets no auth_type (nor "
            "auth_url, username, password): auth_token could not validate any token."
        )
    front_class = _front_class(auth_token.AuthProtocol)
    options = {"delay_auth_decision": True, "oslo_config_config": upstream_conf.oslo_config(path)}
    try:
        return front_class(app, options)
    except Exception as exc:  # keystoneauth's and oslo.config's errors of a bad section
        raise UnsafeSettings(
            f"auth_strategy = keystone: [{group}] of {path} does not configure auth_token: {exc}"
        ) from None


def _front_class(protocol: type) -> type:
    """auth_token's AuthProtocol that also says when Keystone could not be asked."""
    from keystoneauth1 import exceptions as ksa
    from keystonemiddleware.auth_token import _exceptions as ksm

    # What auth_token itself answers 503 for without delay_auth_decision.
    unreachable = (ksa.ConnectFailure, ksa.DiscoveryFailure, ksa.RequestTimeout, ksm.ServiceError)

    class KeystoneFront(protocol):  # type: ignore[misc, valid-type]
        def fetch_token(self, token: str, **kwargs: Any) -> Any:
            try:
                return super().fetch_token(token, **kwargs)
            except ksm.InvalidToken as exc:
                # auth_token raises InvalidToken while handling the outage
                if isinstance(exc.__context__, unreachable):
                    _unreachable.set(str(exc.__context__) or type(exc.__context__).__name__)
                raise

        def process_request(self, request: Any) -> Any:
            reset = _unreachable.set(None)
            try:
                return super().process_request(request)
            finally:
                why = _unreachable.get()
                _unreachable.reset(reset)
                if why is not None:
                    request.environ[KEYSTONE_UNREACHABLE] = why

    return KeystoneFront
