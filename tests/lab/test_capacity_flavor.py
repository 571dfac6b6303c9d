"""`tally capacity --flavor`: a flavor's shape read from the compute API, and the
count checked against booting servers of it in the lab until one finds no host.

    cmp-1  4 VCPU,  8 GiB, 100 GB      cmp-2  8 VCPU, 4 GiB, 60 GB
    (the lab's hosts: VCPU allocation ratio 4, 512 MB of memory reserved)
    m1.cap: 2 VCPU, 1 GiB, disk 10 + ephemeral 5 + swap 1.5 GiB (-> 2 GB) = 17 GB

cmp-1 fits 5 (100 // 17 by disk), cmp-2 3 (3584 // 1024 by memory, 60 // 17 by disk).
"""

from __future__ import annotations

import json

from click.testing import CliRunner, Result

from tally.cli.context import Context
from tally.cli.main import cli
from tally.doctor.fill import flavor_shape


def capacity(lab, *args: str, code: int = 0) -> Result:
    context = Context.for_client(lab.placement)
    context.compute = lab.compute
    result = CliRunner().invoke(cli, ["capacity", *args], obj=context)
    assert result.exit_code == code, result.output
    return result


def test_flavor_count_matches_booting_until_no_host(lab):
    lab.hosts("cmp-1", vcpus=4, memory_mb=8192, disk_gb=100)
    lab.hosts("cmp-2", vcpus=8, memory_mb=4096, disk_gb=60)
    lab.flavor(
        "m1.cap", vcpus=2, ram=1024, disk=10, **{"OS-FLV-EXT-DATA:ephemeral": 5, "swap": 1536}
    )
    result = capacity(lab, "--flavor", "m1.cap", "-f", "json")
    rows = {row["provider"]: row for row in json.loads(result.stdout)}
    assert result.stderr.startswith("8 more of VCPU=2,MEMORY_MB=1024,DISK_GB=17 fit")

    booted = 0
    while lab.boot(f"vm-{booted}", "m1.cap")["status"] != "ERROR":
        booted += 1
    assert booted == 8
    assert {name: (r["fits"], r["limiting"]) for name, r in rows.items()} == {
        "cmp-1": (5, ["DISK_GB"]),
        "cmp-2": (3, ["DISK_GB", "MEMORY_MB"]),
    }
    capacity(lab, "--flavor", "m1.cap", code=1)  # now nothing fits: exit 1


def test_flavor_extra_specs_give_classes_and_traits(lab):
    lab.flavor(
        "m1.traits",
        vcpus=1,
        ram=512,
        disk=0,
        extra_specs={
            "resources:VCPU": "0",
            "resources:PCPU": "2",
            "trait:HW_CPU_X86_AVX2": "required",
            "trait:CUSTOM_SLOW": "forbidden",
            "trait:CUSTOM_IGNORED": "optional",
            "resources1:SRIOV_NET_VF": "1",
        },
    )
    shape = flavor_shape(lab.compute, "m1.traits", ("CUSTOM_A",))
    assert shape.resources == {"MEMORY_MB": 512, "PCPU": 2}
    assert shape.required == ("CUSTOM_A", "!CUSTOM_SLOW,HW_CPU_X86_AVX2")
    assert shape.notes == (
        "flavor m1.traits: extra spec resources1:SRIOV_NET_VF (a numbered request group) "
        "is not counted",
    )


def test_an_unknown_flavor_is_bad_input(lab):
    result = capacity(lab, "--flavor", "nope", code=127)
    assert "no flavor named 'nope'" in result.output


def test_disabled_hosts_are_left_out_as_nova_leaves_them_and_said(lab):
    """Issue 40, item 9: capacity counted disabled hosts (88 where Nova would place
    57) without a word. Left out by default, counted with --include-disabled."""
    lab.hosts("cmp-1", "cmp-2", "cmp-3", vcpus=2, cpu_allocation_ratio=1)
    lab.flavor("m1.one", vcpus=1, ram=512, disk=1)
    lab.compute.put(f"/os-services/{lab.service('cmp-2')['id']}", {"status": "disabled"})
    result = capacity(lab, "--flavor", "m1.one", "-f", "json")
    assert sorted(row["provider"] for row in json.loads(result.stdout)) == ["cmp-1", "cmp-3"]
    assert result.stderr.splitlines()[0].startswith("4 more of VCPU=1,MEMORY_MB=512,DISK_GB=1 fit")
    assert "1 host left out: compute service disabled (COMPUTE_STATUS_DISABLED)" in result.stderr
    every = capacity(lab, "--flavor", "m1.one", "--include-disabled", "-f", "json")
    assert len(json.loads(every.stdout)) == 3 and every.stderr.startswith("6 more")
    assert "left out" not in every.stderr
    booted = 0
    while lab.boot(f"vm-{booted}", "m1.one")["status"] != "ERROR":  # the lab's scheduler
        booted += 1
    assert booted == 4
