"""The compute API's behaviour toward Placement: scheduling and claims, services,
hypervisors, flavors, servers, and the resource tracker."""

from __future__ import annotations

import logging

import pytest

from tally.clients.compute import ComputeError

SMALL = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}


def test_version_documents_are_open(lab):
    root = lab.http.get("/compute/").json()
    assert root["versions"][0]["id"] == "v2.1"
    version = lab.http.get("/compute/v2.1/").json()["version"]
    assert (version["min_version"], version["version"]) == ("2.1", "2.96")
    assert version["links"][0]["href"] == "http://lab.test/compute/v2.1/"


def test_microversion_headers_and_limits(lab):
    answer = lab.http.get(
        "/compute/v2.1/flavors",
        headers={"x-auth-token": "admin", "openstack-api-version": "compute 2.60"},
    )
    assert answer.headers["openstack-api-version"] == "compute 2.60"
    too_new = lab.http.get(
        "/compute/v2.1/flavors",
        headers={"x-auth-token": "admin", "openstack-api-version": "compute 2.200"},
    )
    assert too_new.status_code == 406
    assert "maximum is 2.96" in too_new.json()["notAcceptable"]["message"]


def test_a_new_host_reports_its_inventory(lab):
    host = lab.hosts("cmp-1", vcpus=8, memory_mb=16384, disk_gb=100, cpu_allocation_ratio=2.0)[0]
    inventory = lab.placement.inventories(host["provider_uuid"])["inventories"]
    assert inventory["VCPU"]["total"] == 8 and inventory["VCPU"]["allocation_ratio"] == 2.0
    assert inventory["MEMORY_MB"]["reserved"] == 512
    assert lab.placement.provider(host["provider_uuid"])["name"] == "cmp-1"


def test_server_create_claims_through_placement(cloud):
    server = cloud.boot("web")
    assert server["status"] == "ACTIVE" and server["OS-EXT-STS:task_state"] is None
    assert server["flavor"]["original_name"] == "m1.small"
    host = cloud.host(server["OS-EXT-SRV-ATTR:host"])
    assert cloud.held(server["id"]) == {host["provider_uuid"]: SMALL}
    assert cloud.consumer_type(server["id"]) == "INSTANCE"
    owner = cloud.placement.consumer_allocations(server["id"])
    assert (owner["project_id"], owner["user_id"]) == ("admin", "admin")


ROOT_VOLUME = {"boot_index": 0, "source_type": "image", "destination_type": "volume"}


def test_a_server_booted_from_a_volume_claims_no_root_disk(cloud):
    cloud.flavor("m1.swap", disk=20, swap=1024, **{"OS-FLV-EXT-DATA:ephemeral": 5})
    mapping = [{**ROOT_VOLUME, "uuid": "9b1c6e2a-6f0e-4a57-9d0c-1d2b3c4d5e6f", "volume_size": 20}]
    server = cloud.boot("bfv", "m1.swap", block_device_mapping_v2=mapping)
    assert server["status"] == "ACTIVE" and server["image"] == ""  # as Nova shows it
    host = cloud.host(server["OS-EXT-SRV-ATTR:host"])
    # no root disk on the host: only ephemeral 5 + swap 1 GB are local
    assert cloud.held(server["id"]) == {
        host["provider_uuid"]: {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 6}
    }
    image_backed = cloud.boot("local", "m1.swap")
    assert image_backed["image"]["id"]  # never "": that would read as booted from a volume
    assert cloud.held(image_backed["id"])[image_backed_rp(cloud, image_backed)]["DISK_GB"] == 26
    local_root = [{**ROOT_VOLUME, "destination_type": "local"}]
    assert cloud.boot("local2", "m1.swap", block_device_mapping_v2=local_root)["image"] != ""


def image_backed_rp(cloud, server):
    return cloud.host(server["OS-EXT-SRV-ATTR:host"])["provider_uuid"]


def test_a_server_booted_from_a_volume_moves_without_a_root_disk(cloud):
    server = cloud.boot(
        "bfv", block_device_mapping_v2=[ROOT_VOLUME], availability_zone="nova:cmp-1"
    )
    cloud.action(server["id"], {"migrate": {"host": "cmp-3"}})
    cloud.step(3)
    cloud.action(server["id"], {"confirmResize": None})
    assert cloud.held(server["id"]) == {
        cloud.host("cmp-3")["provider_uuid"]: {"VCPU": 1, "MEMORY_MB": 2048}
    }


def test_shelve_offloads_and_unshelve_claims_again(cloud):
    server = cloud.boot("web")
    cloud.action(server["id"], {"shelve": None})
    assert cloud.server_doc(server["id"])["status"] == "SHELVED_OFFLOADED"
    assert cloud.held(server["id"]) == {}
    with pytest.raises(ComputeError) as caught:
        cloud.action(server["id"], {"shelve": None})
    assert caught.value.status == 409 and "vm_state shelved_offloaded" in caught.value.detail
    services = [cloud.service(h)["id"] for h in ("cmp-1", "cmp-2", "cmp-3")]
    for service in services:  # nowhere to go: it stays shelved
        cloud.compute.put(f"/os-services/{service}", {"status": "disabled"})
    cloud.action(server["id"], {"unshelve": None})
    stuck = cloud.server_doc(server["id"])
    assert stuck["status"] == "SHELVED_OFFLOADED" and cloud.held(server["id"]) == {}
    assert "fault" not in stuck  # Nova shows a fault only on ERROR and DELETED
    for service in services:
        cloud.compute.put(f"/os-services/{service}", {"status": "enabled"})
    cloud.action(server["id"], {"unshelve": None})
    back = cloud.server_doc(server["id"])
    assert back["status"] == "ACTIVE"
    assert cloud.held(server["id"]) == {
        cloud.host(back["OS-EXT-SRV-ATTR:host"])["provider_uuid"]: SMALL
    }
    with pytest.raises(ComputeError) as caught:
        cloud.action(server["id"], {"unshelve": None})
    assert caught.value.status == 409


def test_servers_spread_by_free_ram(cloud):
    hosts = {cloud.boot(f"vm-{n}")["OS-EXT-SRV-ATTR:host"] for n in range(3)}
    assert hosts == {"cmp-1", "cmp-2", "cmp-3"}


def test_no_valid_host_puts_the_server_in_error_with_a_fault(cloud):
    cloud.flavor("huge", vcpus=1, ram=10**6, disk=1)
    server = cloud.boot("big", "huge")
    assert server["status"] == "ERROR"
    assert "No valid host was found" in server["fault"]["message"]
    assert cloud.held(server["id"]) == {}


def test_multi_create_claims_all_with_post_allocations(cloud):
    cloud.compute.post(
        "/servers",
        {"server": {"name": "batch", "flavorRef": "m1.small", "min_count": 30, "max_count": 30}},
    )
    servers = cloud.compute.get("/servers/detail", {"name": "^batch-"})["servers"]
    assert len(servers) == 30 and {s["status"] for s in servers} == {"ACTIVE"}
    usage = [
        cloud.placement.usages(h["provider_uuid"])["VCPU"]
        for h in cloud.compute.get("/os-lab/hosts")["hosts"]
    ]
    assert sorted(usage) == [10, 10, 10]


def test_multi_create_is_all_or_nothing(cloud):
    cloud.flavor("half", vcpus=1, ram=32000, disk=1)
    cloud.compute.post(
        "/servers", {"server": {"name": "h", "flavorRef": "half", "min_count": 7, "max_count": 7}}
    )
    servers = cloud.compute.get("/servers/detail", {"name": "^h-"})["servers"]
    assert {s["status"] for s in servers} == {"ERROR"}
    for host in cloud.compute.get("/os-lab/hosts")["hosts"]:
        assert cloud.provider_consumers(host["provider_uuid"]) == set()


def test_server_delete_releases_its_allocations(cloud):
    server = cloud.boot()
    cloud.compute.delete(f"/servers/{server['id']}")
    assert cloud.held(server["id"]) == {}
    with pytest.raises(ComputeError) as caught:
        cloud.compute.get(f"/servers/{server['id']}")
    assert caught.value.status == 404
    deleted = cloud.compute.get("/servers/detail", {"deleted": "true"})["servers"]
    assert [s["status"] for s in deleted] == ["DELETED"]


def test_delete_while_compute_down_is_local_and_still_releases(cloud):
    server = cloud.boot()
    service = cloud.service(server["OS-EXT-SRV-ATTR:host"])
    cloud.compute.put(f"/os-services/{service['id']}", {"forced_down": True})
    assert cloud.server_doc(server["id"])["host_status"] == "DOWN"
    cloud.compute.delete(f"/servers/{server['id']}")
    assert cloud.held(server["id"]) == {}


def test_list_filters(cloud):
    mine = cloud.boot("mine")
    demo = cloud.compute_as("demo:demo")
    theirs = demo.post("/servers", {"server": {"name": "theirs", "flavorRef": "m1.small"}})
    assert [s["name"] for s in cloud.compute.get("/servers")["servers"]] == ["mine"]
    everyone = cloud.compute.get("/servers", {"all_tenants": "1"})["servers"]
    assert {s["name"] for s in everyone} == {"mine", "theirs"}
    assert [s["name"] for s in demo.get("/servers")["servers"]] == ["theirs"]
    with pytest.raises(ComputeError) as caught:
        demo.get("/servers", {"all_tenants": "1"})
    assert caught.value.status == 403
    on_host = cloud.compute.get(
        "/servers/detail", {"all_tenants": "1", "host": mine["OS-EXT-SRV-ATTR:host"]}
    )["servers"]
    assert [s["name"] for s in on_host] == ["mine"]
    active = cloud.compute.get("/servers", {"all_tenants": "1", "status": "ACTIVE"})["servers"]
    assert len(active) == 2
    assert cloud.compute.get("/servers", {"status": "ERROR"})["servers"] == []
    assert theirs["server"]["id"] not in {s["id"] for s in cloud.compute.get("/servers")["servers"]}


def test_list_pages_with_limit_and_marker(cloud):
    for n in range(5):
        cloud.boot(f"p{n}")
    first = cloud.compute.get("/servers", {"limit": "2"})
    assert len(first["servers"]) == 2 and first["servers_links"][0]["rel"] == "next"
    rest = cloud.compute.get("/servers", {"marker": first["servers"][-1]["id"]})["servers"]
    assert len(rest) == 3


def test_disabling_a_service_sets_the_trait_and_steers_scheduling(cloud):
    service = cloud.service("cmp-1")
    answer = cloud.compute.put(
        f"/os-services/{service['id']}", {"status": "disabled", "disabled_reason": "maintenance"}
    )
    assert answer["service"]["status"] == "disabled"
    assert answer["service"]["disabled_reason"] == "maintenance"
    rp = cloud.host("cmp-1")["provider_uuid"]
    traits = cloud.placement.get(f"/resource_providers/{rp}/traits")["traits"]
    assert "COMPUTE_STATUS_DISABLED" in traits
    hosts = {cloud.boot(f"vm{n}")["OS-EXT-SRV-ATTR:host"] for n in range(4)}
    assert "cmp-1" not in hosts
    cloud.compute.put(f"/os-services/{service['id']}", {"status": "enabled"})
    traits = cloud.placement.get(f"/resource_providers/{rp}/traits")["traits"]
    assert "COMPUTE_STATUS_DISABLED" not in traits


def test_service_update_validation(cloud):
    service = cloud.service("cmp-1")
    with pytest.raises(ComputeError) as caught:
        cloud.compute.put(
            f"/os-services/{service['id']}", {"status": "enabled", "disabled_reason": "x"}
        )
    assert caught.value.status == 400
    with pytest.raises(ComputeError) as caught:
        cloud.compute_as("demo").get("/os-services")
    assert caught.value.status == 403


def test_service_delete_is_refused_while_servers_run_then_removes_the_provider(cloud):
    server = cloud.boot(availability_zone="nova:cmp-2")
    service = cloud.service("cmp-2")
    rp = cloud.host("cmp-2")["provider_uuid"]
    with pytest.raises(ComputeError) as caught:
        cloud.compute.delete(f"/os-services/{service['id']}")
    assert caught.value.status == 409 and "hosting instances" in caught.value.detail
    cloud.compute.delete(f"/servers/{server['id']}")
    cloud.compute.delete(f"/os-services/{service['id']}")
    assert cloud.compute.get("/os-services", {"host": "cmp-2"})["services"] == []
    providers = cloud.placement.get("/resource_providers", {"uuid": rp})["resource_providers"]
    assert providers == []


def test_service_delete_leaves_a_provider_that_still_has_allocations(cloud, caplog):
    server = cloud.boot(availability_zone="nova:cmp-1")
    cloud.action(server["id"], {"os-migrateLive": {"host": "cmp-2", "block_migration": "auto"}})
    migration = cloud.migrations()[0]
    cloud.step()  # preparing -> running
    cloud.compute.post(
        f"/servers/{server['id']}/migrations/{migration['id']}/action", {"force_complete": None}
    )
    # a failed cleanup left the migration's hold on cmp-1 (the doctor's 'stale migration')
    rp = cloud.host("cmp-1")["provider_uuid"]
    cloud.placement.put(
        f"/allocations/{migration['uuid']}",
        {
            "allocations": {rp: {"resources": SMALL}},
            "project_id": "admin",
            "user_id": "admin",
            "consumer_generation": None,
            "consumer_type": "MIGRATION",
        },
    )
    service = cloud.service("cmp-1")
    with caplog.at_level(logging.ERROR, logger="tally.compute"):
        cloud.compute.delete(f"/os-services/{service['id']}")
    assert "Unable to delete compute node resource provider" in caplog.text
    assert cloud.placement.provider(rp)["name"] == "cmp-1"
    assert cloud.provider_consumers(rp) == {migration["uuid"]}
    hypervisors = cloud.compute.get("/os-hypervisors")["hypervisors"]
    assert "cmp-1" not in {h["hypervisor_hostname"] for h in hypervisors}


def test_hypervisors_by_microversion(cloud):
    cloud.boot(availability_zone="nova:cmp-3")
    old = cloud.compute_as("admin", "2.53").get("/os-hypervisors/detail")["hypervisors"]
    row = next(h for h in old if h["hypervisor_hostname"] == "cmp-3")
    assert (row["vcpus_used"], row["running_vms"], row["state"]) == (1, 1, "up")
    assert row["id"] == cloud.host("cmp-3")["provider_uuid"]
    new = cloud.compute.get("/os-hypervisors/detail")["hypervisors"]
    assert "vcpus" not in new[0] and new[0]["service"]["host"] == new[0]["hypervisor_hostname"]
    brief = cloud.compute.get("/os-hypervisors")["hypervisors"]
    assert set(brief[0]) == {"id", "hypervisor_hostname", "state", "status"}


def test_flavors(lab):
    created = lab.flavor("m1.tiny", vcpus=1, ram=512, disk=1, id="1")
    assert created["id"] == "1" and created["swap"] == 0
    assert lab.compute.get("/flavors/1")["flavor"]["name"] == "m1.tiny"
    assert [f["name"] for f in lab.compute.get("/flavors")["flavors"]] == ["m1.tiny"]
    assert lab.compute.get("/flavors/detail")["flavors"][0]["ram"] == 512
    with pytest.raises(ComputeError) as caught:
        lab.flavor("m1.tiny")
    assert caught.value.status == 409
    with pytest.raises(ComputeError) as caught:
        lab.compute_as("demo").post(
            "/flavors", {"flavor": {"name": "x", "vcpus": 1, "ram": 1, "disk": 1}}
        )
    assert caught.value.status == 403


def test_flavor_extra_specs_resources_change_the_claim(cloud):
    cloud.flavor(
        "custom",
        vcpus=2,
        ram=1024,
        disk=10,
        extra_specs={"resources:VCPU": "4", "resources:DISK_GB": "0"},
    )
    server = cloud.boot("c", "custom")
    assert list(cloud.held(server["id"]).values()) == [{"VCPU": 4, "MEMORY_MB": 1024}]


def test_resource_tracker_overwrites_reserved_from_the_host_configuration(cloud):
    host = cloud.host("cmp-1")
    rp = host["provider_uuid"]
    inventory = cloud.placement.inventories(rp)
    inventory["inventories"]["MEMORY_MB"]["reserved"] = 4096  # an operator, by hand
    cloud.placement.put_inventories(
        rp, inventory["resource_provider_generation"], inventory["inventories"]
    )
    reports = cloud.compute.post("/os-lab/tracker", {"host": "cmp-1"})["reports"]
    assert reports[0]["inventory_written"] is True
    assert cloud.placement.inventories(rp)["inventories"]["MEMORY_MB"]["reserved"] == 512
    again = cloud.compute.post("/os-lab/tracker", {})["reports"]
    assert [r["inventory_written"] for r in again] == [False, False, False]
    changed = cloud.compute.put("/os-lab/hosts/cmp-1", {"host": {"reserved_memory_mb": 8192}})
    assert changed["host"]["reserved_memory_mb"] == 8192
    assert cloud.placement.inventories(rp)["inventories"]["MEMORY_MB"]["reserved"] == 8192


def test_resource_tracker_recreates_a_missing_provider(cloud):
    rp = cloud.host("cmp-3")["provider_uuid"]
    cloud.placement.delete(f"/resource_providers/{rp}")
    cloud.compute.post("/os-lab/tracker", {"host": "cmp-3"})
    assert cloud.placement.inventories(rp)["inventories"]["VCPU"]["total"] == 16


def test_lab_api_is_for_admins(cloud):
    with pytest.raises(ComputeError) as caught:
        cloud.compute_as("demo").post("/os-lab/step", {})
    assert caught.value.status == 403


def test_bad_requests_name_the_problem(cloud):
    with pytest.raises(ComputeError) as caught:
        cloud.compute.post("/servers", {"server": {"flavorRef": "m1.small"}})
    assert caught.value.status == 400 and "name" in caught.value.detail
    with pytest.raises(ComputeError) as caught:
        cloud.compute.post("/servers", {"server": {"name": "x", "flavorRef": "nope"}})
    assert caught.value.status == 400 and "Flavor nope" in caught.value.detail
    with pytest.raises(ComputeError) as caught:
        cloud.compute.post("/servers/x/action", {"reboot": {}})
    assert caught.value.status == 400 and "no such action: reboot" in caught.value.detail
    with pytest.raises(ComputeError) as caught:
        cloud.compute.post("/servers/x/action", {"migrate": None})
    assert caught.value.status == 404
    for mapping in (
        "vda",
        ["vda"],
        [{"boot_index": [0]}],
        [{**ROOT_VOLUME, "destination_type": "x"}],
    ):
        with pytest.raises(ComputeError) as caught:
            cloud.boot("x", block_device_mapping_v2=mapping)
        assert caught.value.status == 400 and "block_device_mapping_v2" in caught.value.detail
    response = cloud.http.post(
        "/compute/v2.1/servers",
        content=b"{",
        headers={"x-auth-token": "admin", "content-type": "application/json"},
    )
    assert response.status_code == 400 and "badRequest" in response.json()
