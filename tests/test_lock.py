"""requirements.lock, the file every install reads its versions from (`make serve`, `make test`,
the Docker image): it pins what pyproject.toml declares, and this environment is the locked one.

After a change to pyproject.toml's dependencies, `make lock` refreshes it.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
FIX = "run `make lock` to refresh requirements.lock"


def locked() -> dict[str, list[Requirement]]:
    """Each locked package's lines (one per Python/platform branch), by canonical name."""
    pins: dict[str, list[Requirement]] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            pins.setdefault(canonicalize_name(req.name), []).append(req)
    return pins


def declared() -> list[Requirement]:
    """The dependencies pyproject.toml declares: runtime and every extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        specs.extend(extra)
    return [Requirement(spec) for spec in specs]


def pinned_version(req: Requirement) -> Version:
    (spec,) = req.specifier
    assert spec.operator == "==" and "*" not in spec.version, f"{req} is not an exact pin"
    return Version(spec.version)


def test_every_lock_line_is_an_exact_pin():
    pins = locked()
    assert pins
    for reqs in pins.values():
        for req in reqs:
            pinned_version(req)
            assert not req.url and not req.extras, req


def test_the_lock_pins_every_declared_dependency_within_its_range():
    pins = locked()
    for req in declared():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is declared in pyproject.toml but not locked; {FIX}"
        for pin in pins[name]:
            assert req.specifier.contains(pinned_version(pin), prereleases=True), (
                f"the lock pins {pin}, outside pyproject.toml's {req}; {FIX}"
            )


def test_torch_stays_at_the_version_of_the_cpu_wheel():
    assert [str(pinned_version(r)) for r in locked()["torch"]] == ["2.13.0"]
    assert "torch==2.13.0" in (ROOT / "constraints.txt").read_text().splitlines()


def installed(name: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def requirements(dist: metadata.Distribution, extras: set[str]) -> list[Requirement]:
    """The distribution's requirements whose markers hold here, with these extras asked for."""
    reqs = [Requirement(spec) for spec in dist.requires or []]
    return [
        r
        for r in reqs
        if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in extras | {""})
    ]


def test_this_environment_holds_the_locked_versions():
    """What mt-serve and its installed extras pull in is installed at the locked version."""
    pins = locked()
    project = metadata.distribution("mt-serve")
    extras = set(project.metadata.get_all("Provides-Extra") or [])
    # the project's extras that are not installed here (e.g. bench under `make test`) are skipped
    todo = [r for r in requirements(project, extras) if installed(r.name)]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if (name, frozenset(req.extras)) in seen:
            continue
        seen.add((name, frozenset(req.extras)))
        dist = installed(name)
        assert dist is not None, f"{req} is required but not installed"
        in_force = [r for r in pins.get(name, []) if r.marker is None or r.marker.evaluate()]
        assert in_force, f"{name} is installed but not locked for this platform; {FIX}"
        assert any(r.specifier.contains(dist.version, prereleases=True) for r in in_force), (
            f"{name} {dist.version} is installed, the lock pins {in_force}; `make install-dev`"
        )
        todo.extend(requirements(dist, set(req.extras)))
    names = {name for name, _ in seen}
    assert {"fastapi", "torch", "numpy", "pytest", "starlette", "pydantic-core"} <= names
