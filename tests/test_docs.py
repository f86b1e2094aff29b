"""The README documents what the code has: every setting, every console script."""

import tomllib
from pathlib import Path

from app.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_readme_configuration_table_lists_every_setting_with_its_default():
    for name, field in Settings.model_fields.items():
        row = next(
            (line for line in README.splitlines() if line.startswith(f"| `MT_{name.upper()}` |")),
            None,
        )
        assert row is not None, f"MT_{name.upper()} missing from the README's configuration table"
        assert f"`{field.default}`" in row, (
            f"MT_{name.upper()}: default {field.default!r} not in README"
        )


def test_readme_names_the_console_scripts_and_the_two_commands():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for script in scripts:
        assert script in README
    assert "make serve" in README and "make test" in README and "docker compose up" in README
