"""The console scripts of the service's commands (mt-serve, mt-keys): model_core.cli's
`launcher`, so that a Ctrl-C while app.main imports torch ends mt-serve with one line and
status 130, not a traceback. Imports nothing of the service's own."""

from model_core.cli import launcher

mt_serve = launcher("mt-serve", "app.main:main")
mt_keys = launcher("mt-keys", "app.keys:main")
