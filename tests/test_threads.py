"""model_core.threads: the CPUs a process may use, from fake cgroup trees in a tmp dir."""

from pathlib import Path

import pytest

from model_core import threads
from model_core.threads import available_cpus, cgroup_cpu_limit


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


@pytest.fixture
def host_of_64(monkeypatch):
    """A 64-core host: the affinity mask holds all of them."""
    monkeypatch.setattr(threads, "affinity_cpus", lambda: 64)


def v2_tree(tmp_path: Path, own: str, limits: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    write(root / "cgroup.controllers", "cpuset cpu io memory pids")
    for rel, value in limits.items():
        write(root / rel / "cpu.max", value)
    (root / own.lstrip("/")).mkdir(parents=True, exist_ok=True)
    proc = tmp_path / "proc_cgroup"
    write(proc, f"0::{own}")
    return root, proc


def test_container_limited_to_two_cpus_on_a_64_core_host_v2(tmp_path, host_of_64):
    # inside a container the cgroup namespace makes "/" the container's own cgroup
    root, proc = v2_tree(tmp_path, "/", {"": "200000 100000"})
    assert cgroup_cpu_limit(root, proc) == 2.0
    assert available_cpus(root, proc) == 2


def test_no_quota_leaves_the_affinity_mask(tmp_path, host_of_64):
    root, proc = v2_tree(tmp_path, "/", {"": "max 100000"})
    assert cgroup_cpu_limit(root, proc) is None
    assert available_cpus(root, proc) == 64


def test_fractional_quota_rounds_up_and_never_below_one(tmp_path, host_of_64):
    root, proc = v2_tree(tmp_path, "/", {"": "150000 100000"})
    assert available_cpus(root, proc) == 2
    root, proc = v2_tree(tmp_path / "small", "/", {"": "10000 100000"})
    assert cgroup_cpu_limit(root, proc) == pytest.approx(0.1)
    assert available_cpus(root, proc) == 1


def test_a_parents_quota_applies_to_its_children(tmp_path, host_of_64):
    root, proc = v2_tree(
        tmp_path,
        "/kubepods/pod1/ctr",
        {"kubepods/pod1": "300000 100000", "kubepods/pod1/ctr": "max 100000"},
    )
    assert available_cpus(root, proc) == 3
    root, proc = v2_tree(
        tmp_path / "b",
        "/kubepods/pod1/ctr",
        {"kubepods/pod1": "800000 100000", "kubepods/pod1/ctr": "400000 100000"},
    )
    assert available_cpus(root, proc) == 4


def test_affinity_mask_below_the_quota_wins(tmp_path, monkeypatch):
    monkeypatch.setattr(threads, "affinity_cpus", lambda: 1)  # taskset -c 0
    root, proc = v2_tree(tmp_path, "/", {"": "400000 100000"})
    assert available_cpus(root, proc) == 1


def test_cgroup_v1_cfs_quota(tmp_path, host_of_64):
    root = tmp_path / "cgroup"
    cpu = root / "cpu,cpuacct"
    write(cpu / "docker" / "abc" / "cpu.cfs_quota_us", "250000")
    write(cpu / "docker" / "abc" / "cpu.cfs_period_us", "100000")
    write(cpu / "cpu.cfs_quota_us", "-1")  # the root: no limit
    write(cpu / "cpu.cfs_period_us", "100000")
    proc = tmp_path / "proc_cgroup"
    write(proc, "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/docker/abc")
    assert cgroup_cpu_limit(root, proc) == 2.5
    assert available_cpus(root, proc) == 3


def test_cgroup_v1_unlimited_and_unreadable_files(tmp_path, host_of_64):
    root = tmp_path / "cgroup"
    write(root / "cpu" / "cpu.cfs_quota_us", "-1")
    write(root / "cpu" / "cpu.cfs_period_us", "100000")
    proc = tmp_path / "proc_cgroup"
    write(proc, "3:cpu:/")
    assert available_cpus(root, proc) == 64
    write(root / "cpu" / "cpu.cfs_quota_us", "garbage")
    assert available_cpus(root, proc) == 64


def test_no_cgroup_filesystem_at_all(tmp_path, host_of_64):
    assert cgroup_cpu_limit(tmp_path / "missing", tmp_path / "missing_proc") is None
    assert available_cpus(tmp_path / "missing", tmp_path / "missing_proc") == 64


def test_own_cgroup_missing_from_the_mount_falls_back_to_its_ancestors(tmp_path, host_of_64):
    # the process's path names a cgroup not visible under this mount (another namespace)
    root, proc = v2_tree(tmp_path, "/", {"": "200000 100000"})
    write(proc, "0::/elsewhere/unseen")
    assert available_cpus(root, proc) == 2


def test_this_machine_reports_at_least_one_cpu_within_the_affinity_mask():
    n = available_cpus()
    assert threads.affinity_cpus() >= n >= 1
