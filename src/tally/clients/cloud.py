"""Reach Placement through Keystone: clouds.yaml (or OS_* variables) via openstacksdk,
a keystoneauth1 session for the token, and the service catalog for the endpoint.

keystoneauth authenticates (its own HTTP to Keystone); every Placement request
still goes through the PlacementClient's httpx.Client, with the session's token
added by `KeystoneAuth` and renewed once on a 401.
"""

from __future__ import annotations

import warnings
from collections.abc import Generator
from typing import Any

import httpx

from tally.clients.errors import ConfigurationError

SERVICE_TYPE = "placement"


class KeystoneAuth(httpx.Auth):
    """httpx auth from a keystoneauth1 session: its auth headers on every request;
    on 401 the session's token is invalidated and the request sent once more."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers.update(self.session.get_auth_headers() or {})
        response = yield request
        if response.status_code == 401 and self.session.invalidate():
            request.headers.update(self.session.get_auth_headers() or {})
            yield request


def cloud_connection(
    cloud: str | None,
    *,
    region_name: str | None = None,
    interface: str | None = None,
    service_type: str = SERVICE_TYPE,
) -> dict[str, Any]:
    """The PlacementClient arguments (base_url, auth, verify, cert) for a cloud of
    clouds.yaml (or, with `cloud=None`, the OS_* environment): authenticate with
    keystoneauth and find Placement in the catalog for the interface and region
    (an `placement_endpoint_override` in clouds.yaml wins)."""
    try:
        import keystoneauth1.exceptions as ks_exceptions
        import openstack.config
        from openstack import exceptions as sdk_exceptions
    except ImportError as exc:  # pragma: no cover - the [keystone] extra is missing
        from tally.install import hint

        raise ConfigurationError(f"--os-cloud needs openstacksdk: {hint('keystone')}") from exc
    options = {k: v for k, v in {"region_name": region_name, "interface": interface}.items() if v}
    try:
        with warnings.catch_warnings():  # openstacksdk's notices about its own future
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            region = openstack.config.OpenStackConfig().get_one(cloud=cloud, **options)
        session = region.get_session()
        endpoint = region.get_endpoint(service_type) or session.get_endpoint(
            service_type=service_type,
            interface=region.get_interface(service_type),
            region_name=region.get_region_name(service_type),
        )
    except (sdk_exceptions.SDKException, ks_exceptions.ClientException) as exc:
        where = f"cloud {cloud!r}" if cloud else "the OS_* environment"
        raise ConfigurationError(f"cannot reach Placement through {where}: {exc}") from exc
    if not endpoint:
        raise ConfigurationError(
            f"no {service_type} endpoint in the catalog of cloud {cloud!r} "
            f"(interface {region.get_interface(service_type)}, "
            f"region {region.get_region_name(service_type) or 'any'})"
        )
    verify, cert = region.get_requests_verify_args()
    return {"base_url": endpoint, "auth": KeystoneAuth(session), "verify": verify, "cert": cert}
