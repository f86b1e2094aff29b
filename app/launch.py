"""The console scripts of the service's commands (mt-serve, mt-keys): model_core.cli's
`launcher`, so that a Ctrl-C while app.main imports torch ends mt-serve with one line and
status 130, not a traceback. mt-serve first checks its command line and settings with
app/command.py, which imports no torch: `--help`, a refused argument or a bad setting
answer at once, not after seconds of imports."""

import sys

from model_core.cli import launcher

_serve = launcher("mt-serve", "app.main:main")
mt_keys = launcher("mt-keys", "app.keys:main")


def mt_serve() -> int:
    from app.command import checked_settings, parse_arguments  # noqa: PLC0415

    parse_arguments(sys.argv[1:])  # --help: exits 0; an argument refused: exits 2
    if checked_settings() is None:
        return 2
    return _serve()
