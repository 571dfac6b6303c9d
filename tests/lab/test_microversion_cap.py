"""`lab_compute_max_version`: the lab stands in for the Nova of an older release.

The version documents advertise the cap, a request above it gets 406, `latest`
means it, and every document is shaped as Nova shapes it at the version
negotiated. The field tables here are written from Nova's API reference and its REST
API version history (field -> first version, or (first, last) for fields a version
removed), not from the lab's code, so a field that leaks past its version fails."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tally.config import Settings, load_settings
from tests.lab.conftest import tally_lab

V21 = (2, 1)
NEWEST = (2, 96)
MEMBER = "alice:admin"  # noauth: user alice of project admin (the servers'), not an admin

SERVER = {  # GET /servers/{id} and /servers/detail, as an admin sees them
    **dict.fromkeys(
        (
            "id",
            "name",
            "links",
            "status",
            "tenant_id",
            "user_id",
            "metadata",
            "hostId",
            "image",
            "flavor",
            "created",
            "updated",
            "addresses",
            "accessIPv4",
            "accessIPv6",
            "OS-DCF:diskConfig",
            "progress",
            "OS-EXT-AZ:availability_zone",
            "config_drive",
            "key_name",
            "OS-SRV-USG:launched_at",
            "OS-SRV-USG:terminated_at",
            "OS-EXT-STS:task_state",
            "OS-EXT-STS:vm_state",
            "OS-EXT-STS:power_state",
            "os-extended-volumes:volumes_attached",
            "security_groups",
            "OS-EXT-SRV-ATTR:host",
            "OS-EXT-SRV-ATTR:hypervisor_hostname",
            "OS-EXT-SRV-ATTR:instance_name",
        ),
        V21,
    ),
    **dict.fromkeys(
        (
            "OS-EXT-SRV-ATTR:reservation_id",
            "OS-EXT-SRV-ATTR:launch_index",
            "OS-EXT-SRV-ATTR:hostname",
            "OS-EXT-SRV-ATTR:kernel_id",
            "OS-EXT-SRV-ATTR:ramdisk_id",
            "OS-EXT-SRV-ATTR:root_device_name",
            "OS-EXT-SRV-ATTR:user_data",
        ),
        (2, 3),
    ),
    "locked": (2, 9),
    "host_status": (2, 16),
    "description": (2, 19),
    "tags": (2, 26),
    "trusted_image_certificates": (2, 63),
    "locked_reason": (2, 73),
    "pinned_availability_zone": (2, 96),
}
SERVER_SHOW_ONLY = {"server_groups": (2, 71)}
ADMIN_ONLY = {k for k in SERVER if k.startswith("OS-EXT-SRV-ATTR:")} | {"host_status"}
FOR_EVERYONE_FROM_2_90 = "OS-EXT-SRV-ATTR:hostname"
EMBEDDED_FLAVOR = {"id": (V21, (2, 46)), "links": (V21, (2, 46))} | dict.fromkeys(
    ("vcpus", "ram", "disk", "ephemeral", "swap", "original_name", "extra_specs"), (2, 47)
)
FLAVOR_BRIEF = {"id": V21, "name": V21, "links": V21, "description": (2, 55)}
FLAVOR = FLAVOR_BRIEF | {
    **dict.fromkeys(
        (
            "ram",
            "disk",
            "vcpus",
            "swap",
            "OS-FLV-EXT-DATA:ephemeral",
            "OS-FLV-DISABLED:disabled",
            "os-flavor-access:is_public",
            "rxtx_factor",
        ),
        V21,
    ),
    "extra_specs": (2, 61),
}
SERVICE = dict.fromkeys(
    ("id", "binary", "host", "zone", "status", "state", "updated_at", "disabled_reason"), V21
) | {"forced_down": (2, 11)}
HYPERVISOR = dict.fromkeys(("id", "hypervisor_hostname", "state", "status"), V21)
HYPERVISOR_DETAIL = (
    HYPERVISOR
    | dict.fromkeys(("host_ip", "hypervisor_type", "hypervisor_version", "service"), V21)
    | dict.fromkeys(
        (
            "vcpus",
            "memory_mb",
            "local_gb",
            "vcpus_used",
            "memory_mb_used",
            "local_gb_used",
            "free_ram_mb",
            "free_disk_gb",
            "current_workload",
            "running_vms",
            "disk_available_least",
            "cpu_info",
        ),
        (V21, (2, 87)),
    )
    | {"uptime": (2, 88)}
)
MIGRATION = dict.fromkeys(
    (
        "id",
        "source_node",
        "dest_node",
        "source_compute",
        "dest_compute",
        "dest_host",
        "status",
        "instance_uuid",
        "old_instance_type_id",
        "new_instance_type_id",
        "created_at",
        "updated_at",
    ),
    V21,
) | {"migration_type": (2, 23), "uuid": (2, 59), "user_id": (2, 80), "project_id": (2, 80)}
SERVER_MIGRATION = dict.fromkeys(
    (
        "id",
        "server_uuid",
        "status",
        "source_node",
        "dest_node",
        "source_compute",
        "dest_compute",
        "dest_host",
        "memory_total_bytes",
        "memory_processed_bytes",
        "memory_remaining_bytes",
        "disk_total_bytes",
        "disk_processed_bytes",
        "disk_remaining_bytes",
        "created_at",
        "updated_at",
    ),
    (2, 23),
) | {"uuid": (2, 59), "user_id": (2, 80), "project_id": (2, 80)}


def fields(table: dict[str, Any], version: tuple[int, int]) -> set[str]:
    """The fields of `table` that a document has at `version`."""
    found = set()
    for name, span in table.items():
        first, last = span if isinstance(span[0], tuple) else (span, NEWEST)
        if first <= version <= last:
            found.add(name)
    return found


def version_of(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def ask(lab, method: str, path: str, version: str | None, token: str = "admin", **kw):
    headers = {"x-auth-token": token}
    if version:
        headers["openstack-api-version"] = f"compute {version}"
    return lab.http.request(method, f"/compute/v2.1{path}", headers=headers, **kw)


def get(lab, path: str, version: str, token: str = "admin", **params: str) -> dict:
    answer = ask(lab, "GET", path, version, token, params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def live(version: tuple[int, int], host: str | None) -> dict:
    """An os-migrateLive body valid at `version`."""
    if version < (2, 25):
        return {"host": host, "block_migration": False, "disk_over_commit": False}
    return {"host": host, "block_migration": "auto"}


@pytest.fixture
def capped(make_lab):
    """`capped(cap)`: three hosts, m1.small, db on cmp-2 cold-migrated and confirmed,
    web on cmp-1 live-migrating to cmp-3 (running); the admin client at the cap."""

    def build(cap: str):
        lab = make_lab(lab_compute_max_version=cap)
        lab.hosts("cmp-1", "cmp-2", "cmp-3")
        lab.flavor()
        lab.web = lab.boot("web", availability_zone="nova:cmp-1")
        lab.db = lab.boot("db", availability_zone="nova:cmp-2")
        lab.action(lab.db["id"], {"migrate": None})
        lab.step(3)  # ... -> finished
        lab.action(lab.db["id"], {"confirmResize": None})
        lab.action(lab.web["id"], {"os-migrateLive": live(version_of(cap), "cmp-3")})
        lab.step()  # preparing -> running
        return lab

    return build


# ---------------------------------------------------------------- the cap itself


@pytest.mark.parametrize("cap", ["2.1", "2.53", "2.96"])
def test_the_version_documents_advertise_the_cap(make_lab, cap):
    lab = make_lab(lab_compute_max_version=cap)
    for path, key in (("/compute/", "versions"), ("/compute/v2.1/", "version")):
        found = lab.http.get(path).json()[key]
        document = found[0] if key == "versions" else found
        assert (document["min_version"], document["version"]) == ("2.1", cap)


@pytest.mark.parametrize(("cap", "above"), [("2.1", "2.2"), ("2.53", "2.54"), ("2.53", "2.96")])
def test_a_version_above_the_cap_gets_406_and_latest_means_the_cap(make_lab, cap, above):
    lab = make_lab(lab_compute_max_version=cap)
    refused = ask(lab, "GET", "/flavors", above)
    assert refused.status_code == 406
    message = refused.json()["notAcceptable"]["message"]
    assert message == (
        f"Version {above} is not supported by the API. Minimum is 2.1 and maximum is {cap}."
    )
    legacy = lab.http.get(
        "/compute/v2.1/flavors",
        headers={"x-auth-token": "admin", "x-openstack-nova-api-version": above},
    )
    assert legacy.status_code == 406
    latest = ask(lab, "GET", "/flavors", "latest")
    assert latest.headers["openstack-api-version"] == f"compute {cap}"
    assert latest.headers["x-openstack-nova-api-version"] == cap
    assert ask(lab, "GET", "/flavors", cap).status_code == 200
    assert ask(lab, "GET", "/flavors", None).headers["openstack-api-version"] == "compute 2.1"


def test_the_setting_takes_a_microversion_from_2_1_to_2_96():
    assert Settings.of().lab_compute_max_version == "2.96"
    env = {**os.environ, "TALLY_LAB_COMPUTE_MAX_VERSION": "2.53"}
    assert load_settings(environ=env).lab_compute_max_version == "2.53"
    for wrong in ("2.97", "2.0", "3.1", "latest", "2.053"):
        with pytest.raises(ValueError, match="lab_compute_max_version"):
            Settings.of(lab_compute_max_version=wrong)


# ---------------------------------------------------------------- the documents


CASES = [("2.1", "latest"), ("2.53", "latest"), ("2.96", "latest")]
CASES += [("2.96", v) for v in ("2.2", "2.22", "2.46", "2.47", "2.58", "2.59", "2.87", "2.90")]


@pytest.mark.parametrize(("cap", "asked"), CASES)
def test_every_document_has_the_fields_of_the_version_and_no_newer(capped, cap, asked):
    lab = capped(cap)
    at = version_of(cap if asked == "latest" else asked)
    server = get(lab, f"/servers/{lab.web['id']}", asked)["server"]
    assert set(server) == fields(SERVER | SERVER_SHOW_ONLY, at)
    assert set(server["flavor"]) == fields(EMBEDDED_FLAVOR, at)
    (listed,) = get(lab, "/servers/detail", asked, name="^web$")["servers"]
    assert set(listed) == fields(SERVER, at)
    mine = get(lab, f"/servers/{lab.web['id']}", asked, token=MEMBER)["server"]
    project_view = fields(SERVER | SERVER_SHOW_ONLY, at) - ADMIN_ONLY
    if at >= (2, 90):
        project_view.add(FOR_EVERYONE_FROM_2_90)
    assert set(mine) == project_view

    for flavor in get(lab, "/flavors", asked)["flavors"]:
        assert set(flavor) == fields(FLAVOR_BRIEF, at)
    detail = get(lab, "/flavors/detail", asked)["flavors"][0]
    assert set(detail) == fields(FLAVOR, at)
    assert detail["swap"] == (0 if at >= (2, 75) else "")

    services = get(lab, "/os-services", asked)["services"]
    assert [set(s) for s in services] == [fields(SERVICE, at)] * 3
    assert all(isinstance(s["id"], str if at >= (2, 53) else int) for s in services)
    hypervisors = get(lab, "/os-hypervisors", asked)["hypervisors"]
    assert [set(h) for h in hypervisors] == [fields(HYPERVISOR, at)] * 3
    providers = {h["name"]: h["provider_uuid"] for h in lab.compute.get("/os-lab/hosts")["hosts"]}
    if at >= (2, 53):  # a compute node's uuid is its resource provider's
        assert {h["hypervisor_hostname"]: h["id"] for h in hypervisors} == providers
    else:
        assert all(isinstance(h["id"], int) for h in hypervisors)
    detailed = get(lab, "/os-hypervisors/detail", asked)["hypervisors"]
    assert [set(h) for h in detailed] == [fields(HYPERVISOR_DETAIL, at)] * 3
    assert set(detailed[0]["service"]) == {"host", "id", "disabled_reason"}
    shown = get(lab, f"/os-hypervisors/{hypervisors[0]['id']}", asked)["hypervisor"]
    assert set(shown) == fields(HYPERVISOR_DETAIL, at)

    migrations = get(lab, "/os-migrations", asked)["migrations"]
    assert sorted(m["status"] for m in migrations) == ["confirmed", "running"]
    for migration in migrations:
        expected = fields(MIGRATION, at)
        if at >= (2, 23) and migration["status"] == "running":  # an in-progress live one
            expected.add("links")
        assert set(migration) == expected
    path = f"/servers/{lab.web['id']}/migrations"
    if at < (2, 23):
        assert ask(lab, "GET", path, asked).status_code == 404
        return
    (running,) = get(lab, path, asked)["migrations"]
    assert set(running) == fields(SERVER_MIGRATION, at)
    shown = get(lab, f"{path}/{running['id']}", asked)["migration"]
    assert set(shown) == fields(SERVER_MIGRATION, at)


def test_nothing_of_a_newer_version_shows_with_the_cap_at_2_1(capped):
    lab = capped("2.1")
    server = get(lab, f"/servers/{lab.web['id']}", "latest")["server"]
    flavor = lab.compute.get("/flavors")["flavors"][0]["id"]
    assert server["flavor"] == {
        "id": flavor,
        "links": [{"rel": "bookmark", "href": f"http://lab.test/compute/flavors/{flavor}"}],
    }
    hypervisor = get(lab, "/os-hypervisors/detail", "latest")["hypervisors"][0]
    assert isinstance(hypervisor["cpu_info"], str)  # an object only from 2.28
    assert isinstance(hypervisor["service"]["id"], int)
    every = get(lab, "/os-migrations", "latest", limit="1")["migrations"]
    assert len(every) == 2  # no paging before 2.59
    assert "migrations_links" not in get(lab, "/os-migrations", "latest", limit="1")
    # the lab's own admin API answers at every version
    assert get(lab, "/os-lab", "latest")["lab"]["hosts"] == 3


# ---------------------------------------------------------------- routes and behaviour


def test_server_migration_routes_appear_at_2_22_2_23_2_24_and_abort_widens_at_2_65(cloud):
    web = cloud.boot("web", availability_zone="nova:cmp-1")
    cloud.action(web["id"], {"os-migrateLive": live(NEWEST, "cmp-2")})  # preparing
    migration = cloud.migrations()[0]
    path = f"/servers/{web['id']}/migrations"
    item = f"{path}/{migration['id']}"
    force = {"force_complete": None}
    assert ask(cloud, "POST", f"{item}/action", "2.21", json=force).status_code == 404
    assert ask(cloud, "GET", path, "2.22").status_code == 404
    assert ask(cloud, "GET", item, "2.22").status_code == 404
    assert ask(cloud, "GET", path, "2.23").status_code == 200
    assert ask(cloud, "DELETE", item, "2.23").status_code == 404
    early = ask(cloud, "DELETE", item, "2.64")  # only a running one before 2.65
    assert early.status_code == 400
    message = early.json()["badRequest"]["message"]
    assert message.endswith(
        "is preparing. Cannot abort live migration while the migration is in this state."
    )
    assert ask(cloud, "DELETE", item, "2.65").status_code == 202
    assert cloud.migrations()[0]["status"] == "cancelled"

    cloud.action(web["id"], {"os-migrateLive": live(NEWEST, "cmp-2")})
    cloud.step()  # running
    again = cloud.migrations()[0]
    item = f"{path}/{again['id']}"
    assert ask(cloud, "POST", f"{item}/action", "2.22", json=force).status_code == 202
    assert cloud.migrations()[0]["status"] == "completed"


def test_services_before_2_53_change_by_action_and_are_named_by_integer_id(cloud):
    host = {"host": "cmp-1", "binary": "nova-compute"}
    rp = cloud.host("cmp-1")["provider_uuid"]
    uuid = cloud.service("cmp-1")["id"]
    reason = {**host, "disabled_reason": "maintenance"}
    answer = ask(cloud, "PUT", "/os-services/disable-log-reason", "2.52", json=reason)
    assert answer.json() == {"service": {**reason, "status": "disabled"}}
    assert (
        "COMPUTE_STATUS_DISABLED"
        in cloud.placement.get(f"/resource_providers/{rp}/traits")["traits"]
    )
    answer = ask(cloud, "PUT", "/os-services/enable", "2.1", json=host)
    assert answer.json() == {"service": {**host, "status": "enabled"}}
    assert ask(cloud, "PUT", "/os-services/force-down", "2.10", json=host).status_code == 404
    down = ask(cloud, "PUT", "/os-services/force-down", "2.11", json={**host, "forced_down": True})
    assert down.json() == {"service": {**host, "forced_down": True}}
    assert cloud.service("cmp-1")["state"] == "down"
    # the 2.53 form is not there before 2.53, the old one not from it
    assert ask(cloud, "PUT", f"/os-services/{uuid}", "2.52", json={}).status_code == 404
    assert ask(cloud, "PUT", "/os-services/enable", "2.53", json=host).status_code == 400
    # ids: integers before 2.53, uuids from it
    listed = get(cloud, "/os-services", "2.52", host="cmp-3")["services"][0]
    assert ask(cloud, "DELETE", f"/os-services/{listed['id']}", "2.53").status_code == 400
    assert ask(cloud, "DELETE", f"/os-services/{uuid}", "2.52").status_code == 400
    assert ask(cloud, "DELETE", f"/os-services/{listed['id']}", "2.52").status_code == 204
    assert cloud.compute.get("/os-services", {"host": "cmp-3"})["services"] == []


def test_os_migrations_paging_and_filters_follow_the_version(cloud):
    servers = [cloud.boot(f"vm{n}", availability_zone="nova:cmp-1") for n in range(3)]
    for server in servers:
        cloud.action(server["id"], {"os-migrateLive": live(NEWEST, "cmp-2")})
    cloud.step(2)
    # before 2.59: no paging, unknown parameters ignored, the database's order
    old = get(cloud, "/os-migrations", "2.58", limit="1", marker="x", bogus="1")
    assert [m["instance_uuid"] for m in old["migrations"]] == [s["id"] for s in servers]
    # 2.59: newest first, limit and marker, a next link when the page is full
    page = get(cloud, "/os-migrations", "2.59", limit="2")
    assert [m["instance_uuid"] for m in page["migrations"]] == [s["id"] for s in servers][:0:-1]
    (link,) = page["migrations_links"]
    assert link["rel"] == "next" and f"marker={page['migrations'][-1]['uuid']}" in link["href"]
    rest = get(cloud, "/os-migrations", "2.59", marker=page["migrations"][-1]["uuid"])
    assert [m["instance_uuid"] for m in rest["migrations"]] == [servers[0]["id"]]
    assert ask(cloud, "GET", "/os-migrations", "2.59", params={"bogus": "1"}).status_code == 400
    user = {"user_id": "admin"}
    assert ask(cloud, "GET", "/os-migrations", "2.79", params=user).status_code == 400
    assert len(get(cloud, "/os-migrations", "2.80", **user)["migrations"]) == 3
    assert get(cloud, "/os-migrations", "2.80", user_id="nobody")["migrations"] == []
    # changes-since (2.59), changes-before (2.66)
    future = "2999-01-01T00:00:00Z"
    assert get(cloud, "/os-migrations", "2.59", **{"changes-since": future})["migrations"] == []
    assert len(get(cloud, "/os-migrations", "2.58", **{"changes-since": future})["migrations"]) == 3
    before = {"changes-before": future}
    assert ask(cloud, "GET", "/os-migrations", "2.65", params=before).status_code == 400
    assert len(get(cloud, "/os-migrations", "2.66", **before)["migrations"]) == 3
    both = {"changes-since": future, "changes-before": "2000-01-01T00:00:00Z"}
    assert ask(cloud, "GET", "/os-migrations", "2.66", params=both).status_code == 400


def test_hypervisors_follow_the_version(cloud):
    assert isinstance(
        get(cloud, "/os-hypervisors/detail", "2.27")["hypervisors"][0]["cpu_info"], str
    )
    assert get(cloud, "/os-hypervisors/detail", "2.28")["hypervisors"][0]["cpu_info"] == {}
    pattern = {"hypervisor_hostname_pattern": "cmp-2"}
    assert len(get(cloud, "/os-hypervisors", "2.52", **pattern)["hypervisors"]) == 3  # ignored
    (found,) = get(cloud, "/os-hypervisors", "2.53", **pattern)["hypervisors"]
    assert found["hypervisor_hostname"] == "cmp-2"
    none = {"hypervisor_hostname_pattern": "nope"}
    assert ask(cloud, "GET", "/os-hypervisors", "2.53", params=none).status_code == 404
    assert len(get(cloud, "/os-hypervisors", "2.32", limit="1")["hypervisors"]) == 3
    page = get(cloud, "/os-hypervisors", "2.33", limit="2")
    assert [h["hypervisor_hostname"] for h in page["hypervisors"]] == ["cmp-1", "cmp-2"]
    assert f"marker={page['hypervisors'][-1]['id']}" in page["hypervisors_links"][0]["href"]
    rest = get(cloud, "/os-hypervisors/detail", "2.33", marker=str(page["hypervisors"][-1]["id"]))
    assert [h["hypervisor_hostname"] for h in rest["hypervisors"]] == ["cmp-3"]
    by_uuid, by_id = found["id"], get(cloud, "/os-hypervisors", "2.52")["hypervisors"][1]["id"]
    assert ask(cloud, "GET", f"/os-hypervisors/{by_uuid}", "2.52").status_code == 404
    assert get(cloud, f"/os-hypervisors/{by_id}", "2.52")["hypervisor"]["id"] == by_id
    assert ask(cloud, "GET", f"/os-hypervisors/{by_id}", "2.53").status_code == 400
    assert get(cloud, f"/os-hypervisors/{by_uuid}", "2.53")["hypervisor"]["id"] == by_uuid


def test_action_bodies_are_checked_for_the_version(cloud):
    web = cloud.boot("web", availability_zone="nova:cmp-1")
    action = f"/servers/{web['id']}/action"

    def refused(version: str, body: dict, words: str) -> None:
        answer = ask(cloud, "POST", action, version, json=body)
        assert answer.status_code == 400, answer.text
        assert words in answer.json()["badRequest"]["message"]

    auto = {"host": None, "block_migration": "auto"}
    refused("2.24", {"os-migrateLive": auto}, "'disk_over_commit' is a required property")
    refused("2.24", {"os-migrateLive": {**auto, "disk_over_commit": False}}, "block_migration")
    refused("2.25", {"os-migrateLive": {**auto, "disk_over_commit": False}}, "disk_over_commit")
    refused("2.29", {"os-migrateLive": {**auto, "force": False}}, "'force' was unexpected")
    refused("2.68", {"os-migrateLive": {**auto, "force": False}}, "'force' was unexpected")
    refused("2.25", {"os-migrateLive": {"host": None}}, "'block_migration' is a required")
    refused("2.13", {"evacuate": {}}, "'onSharedStorage' is a required property")
    refused("2.14", {"evacuate": {"onSharedStorage": False}}, "'onSharedStorage' was unexpected")
    refused("2.56", {"migrate": {"host": "cmp-2", "force": True}}, "'force' was unexpected")
    answer = ask(cloud, "POST", action, "2.30", json={"os-migrateLive": {**auto, "force": False}})
    assert answer.status_code == 202
    cloud.step(2)
    # migrate reads `host` only from 2.56 (before, the scheduler picks: most free RAM)
    cloud.boot("filler", availability_zone="nova:cmp-3")
    assert (
        ask(cloud, "POST", action, "2.55", json={"migrate": {"host": "cmp-3"}}).status_code == 202
    )
    assert cloud.migrations(instance_uuid=web["id"])[0]["dest_compute"] == "cmp-1"
    cloud.step(3)
    cloud.action(web["id"], {"confirmResize": None})
    assert (
        ask(cloud, "POST", action, "2.56", json={"migrate": {"host": "cmp-3"}}).status_code == 202
    )
    assert cloud.migrations(instance_uuid=web["id"])[0]["dest_compute"] == "cmp-3"
    cloud.step(3)
    cloud.action(web["id"], {"confirmResize": None})
    # evacuate: the new password in the answer before 2.14, no body from it
    on_cmp3 = {"forced_down": True}
    cloud.compute.put(f"/os-services/{cloud.service('cmp-3')['id']}", on_cmp3)
    old = ask(cloud, "POST", action, "2.13", json={"evacuate": {"onSharedStorage": False}})
    assert old.status_code == 200 and set(old.json()) == {"adminPass"}
    other = cloud.boot("other", availability_zone="nova:cmp-2")
    cloud.compute.put(f"/os-services/{cloud.service('cmp-2')['id']}", on_cmp3)
    new = ask(cloud, "POST", f"/servers/{other['id']}/action", "2.14", json={"evacuate": {}})
    assert new.status_code == 200 and new.content == b""


def test_request_members_newer_than_the_version_are_refused(cloud):
    flavor = {"flavor": {"name": "described", "vcpus": 1, "ram": 64, "disk": 1, "description": "x"}}
    early = ask(cloud, "POST", "/flavors", "2.54", json=flavor)
    assert early.status_code == 400 and "'description' was unexpected" in early.text
    made = ask(cloud, "POST", "/flavors", "2.55", json=flavor)
    assert made.status_code == 200 and made.json()["flavor"]["description"] == "x"
    server = {"server": {"name": "vm", "flavorRef": "m1.small", "host": "cmp-2"}}
    early = ask(cloud, "POST", "/servers", "2.73", json=server)
    assert early.status_code == 400 and "'host' was unexpected" in early.text
    made = ask(cloud, "POST", "/servers", "2.74", json=server)
    assert made.status_code == 202
    assert cloud.server_doc(made.json()["server"]["id"])["OS-EXT-SRV-ATTR:host"] == "cmp-2"


def test_host_status_is_for_administrators(cloud):
    web = cloud.boot("web")
    seen = get(cloud, f"/servers/{web['id']}", "2.96", token=MEMBER)["server"]
    assert "host_status" not in seen and "OS-EXT-SRV-ATTR:host" not in seen
    assert seen["OS-EXT-SRV-ATTR:hostname"] == "web"  # for every user from 2.90
    assert (
        "OS-EXT-SRV-ATTR:hostname"
        not in get(cloud, f"/servers/{web['id']}", "2.89", token=MEMBER)["server"]
    )
    assert cloud.server_doc(web["id"])["host_status"] == "UP"


@pytest.mark.parametrize("cap", ["2.1", "2.53"])
def test_the_lab_commands_work_against_a_capped_lab(make_lab, cap):
    lab = make_lab(lab_compute_max_version=cap)
    assert "Lab up: 3 hosts, 6 servers." in tally_lab(lab, "up")
    server = lab.compute.get("/servers", {"name": "^demo-1$"})["servers"][0]["id"]
    moved = json.loads(tally_lab(lab, "migrate", server, "-f", "json"))
    kind = "live-migration" if version_of(cap) >= (2, 23) else None  # a type from 2.23
    assert (moved["migration_type"], moved["status"]) == (kind, "preparing")
    tally_lab(lab, "step", "--count", "2")
    cold = json.loads(tally_lab(lab, "migrate", server, "--cold", "-f", "json"))
    assert cold["status"] == "pre-migrating" and cold["uuid"] is None  # no uuid before 2.59
    out = tally_lab(lab, "migrate", server, "--cold", "--host", "lab-compute-3", code=1)
    assert f"--host with --cold needs compute 2.56 (this is {cap})" in out
    report = json.loads(tally_lab(lab, "break", "migration-hang", "-f", "json"))
    assert report["migration_status"] == "running"
    assert tally_lab(lab, "reset").startswith("Lab reset: removed 6 servers, 3 migrations")
