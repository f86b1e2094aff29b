"""`mt-serve`'s command line. The service is configured by environment variables only (one
`Settings`, app/settings.py), so the command takes no arguments but `--help`, which lists the
settings; an argument is refused with the variable that does what it asked (`--port 9000`:
`MT_PORT=9000 mt-serve`) instead of being ignored while the server starts. Light (pydantic
settings, no torch): the console script checks the command line and the settings with it
before it imports the server (app/launch.py)."""

from __future__ import annotations

import argparse
import difflib
import sys
import textwrap

from pydantic import ValidationError

from .settings import Settings

DESCRIPTION = (
    "Serve the translation models in MT_WEIGHTS_DIR over HTTP: a LibreTranslate-compatible "
    "API, a web page, file translation. Configured by environment variables only (or a "
    "container's environment), e.g. MT_PORT=9000 MT_WEIGHTS_DIR=weights mt-serve; the README's "
    "configuration table says more."
)


def settings_help(width: int = 100) -> str:
    """Each setting's variable, default and description, wrapped to `width` columns."""
    lines = ["settings (environment variables, default in brackets):"]
    for name, field in Settings.model_fields.items():
        value = field.get_default(call_default_factory=True)
        default = "unset" if value is None else str(value)
        if isinstance(value, bool):
            default = default.lower()
        text = f"{field.description or ''} [{default}]".strip()
        lines.append(f"  MT_{name.upper()}")
        lines += textwrap.wrap(text, width, initial_indent="      ", subsequent_indent="      ")
    return "\n".join(lines)


def setting_for(argument: str, following: str | None) -> str | None:
    """The variable assignment an option-like argument meant (`--port 9000`, `--port=9000`,
    `--weights-dir x`, `--weights x`: the one setting it starts, or the one it is close to), or
    None when it names no setting."""
    if not argument.startswith("--"):
        return None
    name, eq, value = argument[2:].partition("=")
    field = name.replace("-", "_").lower()
    if field not in Settings.model_fields:  # --weights: MT_WEIGHTS_DIR; --thread: MT_THREADS
        fields = list(Settings.model_fields)
        close = [f for f in fields if f.startswith(f"{field}_")]
        close = close or difflib.get_close_matches(field, fields, n=1, cutoff=0.7)
        if len(close) != 1:
            return None
        field = close[0]
    if not eq:
        value = following if following is not None and not following.startswith("-") else "..."
    return f"MT_{field.upper()}={value}"


def parse_arguments(argv: list[str] | None = None) -> None:
    """--help prints the settings and exits 0; any other argument exits 2 with one line."""
    parser = argparse.ArgumentParser(
        prog="mt-serve",
        description=textwrap.fill(DESCRIPTION, 100),
        epilog=settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _, rest = parser.parse_known_args(argv)
    if not rest:
        return
    meant = next(
        (
            s
            for i, a in enumerate(rest)
            if (s := setting_for(a, rest[i + 1] if i + 1 < len(rest) else None))
        ),
        None,
    )
    hint = f"{meant} mt-serve" if meant else "MT_PORT=9000 mt-serve"
    parser.error(
        f"no arguments but --help ({' '.join(rest)}): the settings are environment "
        f"variables, e.g. {hint}; mt-serve --help lists them"
    )


def checked_settings() -> Settings | None:
    """The settings the environment gives; None, with one line on stderr naming each bad
    one, where they are invalid."""
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            # a check of several settings together has no field: its message names them
            f"MT_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
            if e["loc"]
            else e["msg"].removeprefix("Value error, ")
            for e in exc.errors()
        )
        print(f"mt-serve: invalid setting(s): {problems}", file=sys.stderr)
        return None
