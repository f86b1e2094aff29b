"""Rolling restart under load: steady POST /translate traffic through the load balancer of
docker-compose.scale.yml while its replicas are restarted one at a time, each restart waiting
until HAProxy has seen the replica go down and come back up before the next one starts.

    docker compose -f docker-compose.scale.yml up -d
    python -m bench.rolling_restart --concurrency 8

Every answer is counted: served (200 with a translation), of which retried (HAProxy sent the
request again to another replica: its X-LB-Retries header is not 0), refused (503 with
Retry-After reaching the client: nothing lost, but not served), failed (anything else: another
status, a 503 without Retry-After, a connection error or an answer cut off).

Exit status: 0 every request served; 1 some failed; 2 none failed but some were refused;
3 the run could not be completed (not loopback, a restart command failed, a replica did not come
back, the time limit passed). Traffic goes only to 127.0.0.1 / localhost / ::1; the run is
bounded by --max-seconds and --max-requests.
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.rolling_restart"))

import argparse
import asyncio
import csv
import io
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from urllib.parse import urlsplit

import httpx

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
DEFAULT_RESTART = "docker compose -f docker-compose.scale.yml restart -t 40 {replica}"


class RunError(Exception):
    """The run could not be completed (exit status 3)."""


@dataclass
class Tally:
    sent: int = 0
    served: int = 0
    retried: int = 0
    refused: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)  # the first few, for the report

    def fail(self, what: str) -> None:
        self.failed += 1
        if len(self.failures) < 10:
            self.failures.append(what)


def check_loopback(url: str) -> None:
    host = urlsplit(url).hostname
    if host not in LOOPBACK:
        raise RunError(f"{url}: only loopback addresses ({', '.join(sorted(LOOPBACK))})")


async def backend_stats(client: httpx.AsyncClient, stats_url: str, backend: str) -> dict:
    """HAProxy's CSV statistics of the backend: {server name: row}, row 'BACKEND' included."""
    response = await client.get(stats_url, timeout=5)
    response.raise_for_status()
    text = response.text.lstrip("# ")
    return {
        row["svname"]: row for row in csv.DictReader(io.StringIO(text)) if row["pxname"] == backend
    }


def classify(tally: Tally, response: httpx.Response) -> None:
    if response.status_code == 200:
        try:
            ok = bool(response.json().get("translatedText"))
        except ValueError:
            ok = False
        if not ok:
            tally.fail(f"200 without a translation: {response.text[:80]!r}")
            return
        tally.served += 1
        if response.headers.get("x-lb-retries", "0").lstrip("+") not in ("", "0"):
            tally.retried += 1
    elif response.status_code == 503 and response.headers.get("retry-after"):
        tally.refused += 1
    else:
        tally.fail(f"{response.status_code}: {response.text[:80]!r}")


async def client_loop(
    client: httpx.AsyncClient,
    url: str,
    payload: dict,
    tally: Tally,
    stop: asyncio.Event,
    limit: int,
) -> None:
    while not stop.is_set() and tally.sent < limit:
        tally.sent += 1
        try:
            response = await client.post(url, json=payload)
        except httpx.HTTPError as exc:  # refused, reset, cut off, timed out
            tally.fail(f"{type(exc).__name__}: {exc}")
            continue
        classify(tally, response)


async def wait_until(check, what: str, deadline: float, stop: asyncio.Event | None = None):
    """Polls `check()` (async) until it returns true; RunError at the deadline."""
    while True:
        if await check():
            return
        if time.monotonic() > deadline or (stop is not None and stop.is_set()):
            raise RunError(f"gave up waiting: {what}")
        await asyncio.sleep(0.2)


async def run(args) -> dict:
    for url in (args.url, args.stats_url):
        check_loopback(url)
    started = time.monotonic()
    deadline = started + args.max_seconds
    replicas = args.replicas.split(",")
    payload = {"q": args.text, "source": args.source, "target": args.target}
    tally, stop, restarts = Tally(), asyncio.Event(), []
    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=0)
    async with (
        httpx.AsyncClient(timeout=args.request_timeout, limits=limits) as client,
        httpx.AsyncClient() as stats_client,
    ):

        async def stats() -> dict:
            return await backend_stats(stats_client, args.stats_url, args.backend)

        async def all_up() -> bool:
            rows = await stats()
            missing = set(replicas) - set(rows)
            if missing:
                raise RunError(f"the balancer has no server {sorted(missing)}")
            return all(rows[r]["status"] == "UP" for r in replicas)

        await wait_until(all_up, "every replica UP before the load starts", deadline)
        first = (await stats())["BACKEND"]
        url = args.url.rstrip("/") + "/translate"
        clients = [
            asyncio.create_task(client_loop(client, url, payload, tally, stop, args.max_requests))
            for _ in range(args.concurrency)
        ]
        try:

            async def load_flows() -> bool:
                if all(c.done() for c in clients):
                    raise RunError("the clients stopped (--max-requests reached)")
                return tally.served + tally.failed + tally.refused >= args.concurrency

            await wait_until(load_flows, "the first answers", deadline)
            for replica in replicas:
                downs = int((await stats())[replica]["chkdown"])
                began = time.monotonic()
                command = args.restart_command.format(replica=replica)
                done = await asyncio.to_thread(
                    subprocess.run, command, shell=True, capture_output=True, text=True
                )
                if done.returncode != 0:
                    raise RunError(f"{command!r} exited {done.returncode}: {done.stderr.strip()}")

                async def back(replica=replica, downs=downs) -> bool:
                    rows = await stats()
                    return int(rows[replica]["chkdown"]) > downs and await all_up()

                await wait_until(back, f"{replica} seen down, then every replica UP", deadline)
                restarts.append({"replica": replica, "seconds": round(time.monotonic() - began, 1)})
                print(f"{replica}: restarted, back in rotation after {restarts[-1]['seconds']} s")
        finally:
            stop.set()
            await asyncio.gather(*clients, return_exceptions=True)
        last = (await stats())["BACKEND"]
    return {
        **asdict(tally),
        "seconds": round(time.monotonic() - started, 1),
        "restarts": restarts,
        "balancer_retries": int(last["wretr"]) - int(first["wretr"]),
        "balancer_redispatches": int(last["wredis"]) - int(first["wredis"]),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000", help="the balancer")
    p.add_argument("--stats-url", default="http://127.0.0.1:8404/stats;csv", help="HAProxy CSV")
    p.add_argument("--backend", default="replicas", help="HAProxy backend of the replicas")
    p.add_argument("--replicas", default="mt1,mt2,mt3", help="server names, restarted in order")
    p.add_argument(
        "--restart-command",
        default=DEFAULT_RESTART,
        help="shell command restarting one replica; {replica} is its name",
    )
    p.add_argument("--concurrency", type=int, default=8, help="clients sending at once")
    p.add_argument("--max-seconds", type=float, default=900.0, help="the whole run at most")
    p.add_argument("--max-requests", type=int, default=200_000, help="requests at most")
    p.add_argument("--request-timeout", type=float, default=120.0)
    p.add_argument("--text", default="Where is the train station? I would like to go home.")
    p.add_argument("--source", default="en")
    p.add_argument("--target", default="de")
    p.add_argument("--json", help="also write the report to this file")
    args = p.parse_args(argv)
    try:
        report = asyncio.run(run(args))
    except RunError as exc:
        print(f"rolling restart: {exc}", file=sys.stderr)
        return 3
    print(
        f"requests {report['sent']}: served {report['served']} (retried by the balancer "
        f"{report['retried']}), refused with Retry-After {report['refused']}, "
        f"failed {report['failed']}; {len(report['restarts'])} restart(s) in "
        f"{report['seconds']} s; balancer retries {report['balancer_retries']}, "
        f"redispatches {report['balancer_redispatches']}"
    )
    for failure in report["failures"]:
        print(f"  failed: {failure}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
    if report["failed"]:
        return 1
    return 2 if report["refused"] else 0
