"""Open-loop load on the HTTP service: the static batcher against the continuous scheduler.

Requests arrive as a Poisson process at fixed rates, whether or not earlier ones were answered
(as traffic from many independent users does); 80% are short texts (5-15 words) and 20% long
ones (60-150 words, several sentences each, which the service splits), all at one beam size.
First each server's capacity is measured (requests/s answered with the same mix, closed
loop, many clients; `--capacity-rounds N` splits that time into N turns per server in a
rotating order, pooled); then each rate (a share of static's) runs on every server, side by
side, the servers taking turns in an order that rotates at each round and load (the machine's
speed drifts; no server always goes first or last). `--rounds N` runs each load N times on
every server, round r with its own request sequence (the same for every server), and pools
them. The table gives throughput and the p50/p99 latency of short and of long requests, with
each server's peak resident memory. Throughput three ways: "steady", the answers given from a
quarter of the arrival time to its end, per second (what the server keeps up with once the
first requests are answered: the arrival rate while it keeps up, less where it falls behind),
as requests and as their source words (a scheduler that answers short requests first
answers more requests with the same work: words count the work); and "to the last answer",
every answer over the time until the last one, which also counts how long the last requests
took after the arrivals ended (a scheduler that leaves a long request for last scores lower
there at the same capacity). During the capacity phase each server's own metrics give its
engine's share of busy time, its steps (batches) per second, sentences per step and engine
ms per step.

    python -m bench.open_loop_bench --weights weights --loads 0.5,0.8,1.0

`--rows 128` adds a server, continuous with MT_MAX_RUNNING_ROWS=128 (a comma list adds one
per value), and `--step-rows 128` one with MT_MAX_STEP_ROWS=128 (`128:N` also sets
MT_MAX_BATCH_SIZE=N, `128@250` MT_STEP_BOUND_WAIT_MS=250), and `--join-every 4` one with
MT_JOIN_EVERY_STEPS=4; each takes its turns with the others.

Traffic goes only to the servers this command starts on loopback ports; each level is
bounded in requests and seconds. It measures; it asserts nothing about speed.
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.open_loop_bench"))

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path

from .common import DEFAULT_SRC, machine, table
from .launch import stop
from .load_bench import Connection, batch_totals, percentile, run, start_server, wait_ready


def make_texts(lines: list[str], lo: int, hi: int, count: int, seed: int) -> list[str]:
    """Texts of lo-hi words, each made of consecutive whole sentences of `lines`."""
    rng = random.Random(seed)
    texts = []
    while len(texts) < count:
        start, words, parts = rng.randrange(len(lines)), 0, []
        target = rng.randint(lo, hi)
        for line in lines[start:] + lines[:start]:
            n = len(line.split())
            if words + n > hi:
                continue
            parts.append(line)
            words += n
            if words >= target:
                break
        if lo <= words <= hi:
            texts.append(" ".join(parts))
    return texts


class Mix:
    """The request mix: each request short (p = 1 - long_share) or long, drawn in order."""

    def __init__(self, lines: list[str], long_share: float, seed: int):
        self.short = make_texts(lines, 5, 15, 200, seed)
        self.long = make_texts(lines, 60, 150, 50, seed + 1)
        self.rng, self.long_share = random.Random(seed + 2), long_share

    def draw(self) -> tuple[str, str]:
        if self.rng.random() < self.long_share:
            return "long", self.rng.choice(self.long)
        return "short", self.rng.choice(self.short)


def body(text: str, beam: int) -> dict:
    return {"q": text, "source": "en", "target": "de", "beam_size": beam}


async def closed_loop(
    port: int, mix: Mix, clients: int, seconds: float, beam: int
) -> tuple[int, float]:
    """(requests answered, seconds) by `clients` clients sending back to back (the capacity:
    their ratio)."""
    done = 0
    start = time.perf_counter()

    async def client() -> None:
        nonlocal done
        conn = Connection("127.0.0.1", port)
        while time.perf_counter() - start < seconds:
            status, _ = await conn.post_json("/translate", body(mix.draw()[1], beam))
            done += status == 200
        await conn.close()

    await asyncio.gather(*(client() for _ in range(clients)))
    return done, time.perf_counter() - start


# the steady part of a level: from this share of its arrival time to the end of the arrivals
SETTLE = 0.25


async def open_loop(port: int, mix: Mix, rate: float, seconds: float, beam: int, seed: int):
    """Poisson arrivals at `rate` requests/s for `seconds`; every request is awaited. Returns
    {kind: [latency s]}, failures, wall seconds (until the last answer), and the answers
    given in the steady part of the arrivals (from SETTLE x seconds to seconds): how many, and
    their source words."""
    rng = random.Random(seed)
    idle: list[tuple[float, Connection]] = []  # (when it was last used, connection)
    latencies: dict[str, list[float]] = {"short": [], "long": []}
    failures: dict[str, int] = {}
    answered_at: list[tuple[float, int]] = []  # (seconds from the start, source words)

    async def one(kind: str, text: str) -> None:
        t0 = time.perf_counter()
        conn = None
        while idle and conn is None:
            used, conn = idle.pop()
            if t0 - used > 2.0:  # the server closes idle keep-alive connections after 5 s
                await conn.close()
                conn = None
        conn = conn or Connection("127.0.0.1", port)
        try:
            status, _ = await conn.post_json("/translate", body(text, beam))
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
            return
        if status == 200:
            now = time.perf_counter()
            latencies[kind].append(now - t0)
            answered_at.append((now - start, len(text.split())))
        else:
            failures[str(status)] = failures.get(str(status), 0) + 1
        idle.append((time.perf_counter(), conn))

    tasks = []
    start = time.perf_counter()
    due = start
    while due - start < seconds:
        due += rng.expovariate(rate)
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(*mix.draw())))
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - start
    for _, conn in idle:
        await conn.close()
    steady = [words for t, words in answered_at if SETTLE * seconds <= t <= seconds]
    return latencies, failures, wall, (len(steady), sum(steady))


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text}: at least 1")
    return n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weights", type=Path, default=Path("weights"))
    p.add_argument("--src", type=Path, default=DEFAULT_SRC)
    p.add_argument("--loads", default="0.5,0.8,1.0", help="shares of the static capacity")
    p.add_argument("--seconds", type=float, default=40.0, help="arrivals per level and server")
    p.add_argument("--capacity-seconds", type=float, default=30.0)
    p.add_argument("--capacity-clients", type=int, default=32)
    p.add_argument("--capacity-rounds", type=positive, default=1, help="turns the "
                   "capacity-seconds are split into, the servers' order rotating, pooled")  # fmt: skip
    p.add_argument(
        "--warm-seconds", type=float, default=5.0, help="closed loop per server before measuring"
    )
    p.add_argument("--warm-clients", type=int, default=4)
    p.add_argument("--long-share", type=float, default=0.2)
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument(
        "--port", type=int, default=8775, help="static; the continuous servers the next ones"
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rounds", type=int, default=1, help="runs per load and server, pooled")
    p.add_argument("--rows", default="", help="comma list: continuous servers with these "
                   "MT_MAX_RUNNING_ROWS besides the default one")  # fmt: skip
    p.add_argument("--step-rows", default="", help="comma list: continuous servers with "
                   "these MT_MAX_STEP_ROWS; ROWS:N also sets MT_MAX_BATCH_SIZE=N, "
                   "ROWS@MS MT_STEP_BOUND_WAIT_MS=MS")  # fmt: skip
    p.add_argument("--join-every", default="", help="comma list: continuous servers with "
                   "these MT_JOIN_EVERY_STEPS")  # fmt: skip
    args = p.parse_args(argv)
    lines = [x for x in args.src.read_text(encoding="utf-8").splitlines() if x.strip()]
    loads = [float(x) for x in args.loads.split(",")]

    # name: (scheduler, MT_MAX_RUNNING_ROWS, MT_MAX_STEP_ROWS, MT_MAX_BATCH_SIZE,
    # MT_STEP_BOUND_WAIT_MS, MT_JOIN_EVERY_STEPS)
    variants = {
        "static": ("static", 0, 0, 64, 0, 1),
        "continuous": ("continuous", 0, 0, 64, 0, 1),
    }
    for rows in filter(None, args.rows.split(",")):
        variants[f"continuous rows={int(rows)}"] = ("continuous", int(rows), 0, 64, 0, 1)
    for every in filter(None, args.join_every.split(",")):
        variants[f"continuous join_every={int(every)}"] = ("continuous", 0, 0, 64, 0, int(every))
    for spec in filter(None, args.step_rows.split(",")):
        spec, _, wait = spec.partition("@")
        rows, _, batch = spec.partition(":")
        name = f"continuous step_rows={int(rows)}" + (f" batch={int(batch)}" if batch else "")
        name += f" wait={float(wait):g}ms" if wait else ""
        variants[name] = ("continuous", 0, int(rows), int(batch or 64), float(wait or 0), 1)
    schedulers = {name: args.port + i for i, name in enumerate(variants)}
    servers = {}
    for name, port in schedulers.items():  # each server's own, whatever the caller's are
        scheduler, rows, step_rows, batch, wait, every = variants[name]
        servers[name] = start_server(
            args.weights,
            port,
            batch,
            args.threads,
            "default",
            MT_SCHEDULER=scheduler,
            MT_MAX_RUNNING_ROWS=str(rows),
            MT_MAX_STEP_ROWS=str(step_rows),
            MT_STEP_BOUND_WAIT_MS=str(wait),
            MT_JOIN_EVERY_STEPS=str(every),
        )
    results = {}
    try:
        for port in schedulers.values():
            wait_ready(f"http://127.0.0.1:{port}")
            # untimed: on a GPU a decode path's first call pays one-time costs
            mix = Mix(lines, args.long_share, 99)
            run(closed_loop(port, mix, args.warm_clients, args.warm_seconds, args.beam_size))
        # every server's, one after the other; with --capacity-rounds N in N turns of
        # capacity-seconds / N each, in an order that rotates, pooled (the machine's speed
        # drifts: the loads are shares of static's, and a static capacity measured while the
        # machine ran faster than during the loads would overload every server)
        totals = {name: [0, 0.0, 0, 0, 0.0] for name in schedulers}  # answered, s, engine's
        order, turn_s = list(schedulers), args.capacity_seconds / args.capacity_rounds
        for r in range(args.capacity_rounds):
            for name in order:
                port = schedulers[name]
                before = batch_totals(f"http://127.0.0.1:{port}")
                mix = Mix(lines, args.long_share, args.seed + 1000 * r)  # as the loads' rounds
                done, seconds = run(
                    closed_loop(port, mix, args.capacity_clients, turn_s, args.beam_size)
                )
                after = batch_totals(f"http://127.0.0.1:{port}")
                deltas = (b - a for a, b in zip(before, after, strict=True))
                for i, value in enumerate((done, seconds, *deltas)):
                    totals[name][i] += value
            order = order[1:] + order[:1]
        capacities, engines = {}, {}
        for name, (done, wall, sentences, steps, busy) in totals.items():
            capacities[name] = done / wall
            per = 1 / steps if steps else float("nan")  # no batch in that time: no figures
            engines[name] = (100 * busy / wall, steps / wall, sentences * per, 1e3 * busy * per)
        capacity = capacities["static"]  # the loads are static's
        print(f"capacities: {capacities}", file=sys.stderr)
        order = list(schedulers)
        steady_s = (1 - SETTLE) * args.seconds  # per round
        for load in loads:
            results.update(
                {(load, name): ({"short": [], "long": []}, {}, 0.0, (0, 0)) for name in variants}
            )
            for r in range(args.rounds):
                for name in order:
                    port = schedulers[name]
                    seed = args.seed + 1000 * r  # the same requests for every server in a round
                    mix = Mix(lines, args.long_share, seed)
                    lat, failures, wall, steady = run(
                        open_loop(port, mix, load * capacity, args.seconds, args.beam_size, seed)
                    )
                    pooled, failed, walls, steadies = results[(load, name)]
                    for kind in pooled:
                        pooled[kind] += lat[kind]
                    for kind, count in failures.items():
                        failed[kind] = failed.get(kind, 0) + count
                    steadies = (steadies[0] + steady[0], steadies[1] + steady[1])
                    results[(load, name)] = (pooled, failed, walls + wall, steadies)
                    n = len(lat["short"]) + len(lat["long"])
                    print(
                        f"{load:.0%} {name}: {steady[0] / steady_s:.2f} requests/s and "
                        f"{steady[1] / steady_s:.0f} words/s steady, {n / wall:.2f} requests/s "
                        f"to the last answer {failures}",
                        file=sys.stderr,
                    )
                # the next round (and load) starts with the next server: no server always
                # runs first or last, where the machine's speed drifts
                order = order[1:] + order[:1]
        peaks = {name: peak_rss_mb(server.pid) for name, server in servers.items()}
    finally:
        stop(servers.values())
    rows = []
    for (load, name), (lat, failures, wall, (steady, words)) in results.items():
        n = len(lat["short"]) + len(lat["long"])
        rows.append(
            [
                f"{load:.0%}",
                name,
                n,
                sum(failures.values()),
                steady / (steady_s * args.rounds),
                words / (steady_s * args.rounds),
                n / wall,
                percentile(lat["short"], 0.5) * 1e3,
                percentile(lat["short"], 0.99) * 1e3,
                percentile(lat["long"], 0.5) * 1e3,
                percentile(lat["long"], 0.99) * 1e3,
            ]
        )
    print(
        f"\nmachine: {machine()}; beam {args.beam_size}; {1 - args.long_share:.0%} short "
        f"(5-15 words), {args.long_share:.0%} long (60-150 words); static capacity "
        f"{capacity:.2f} requests/s; {args.seconds:.0f} s of arrivals per level and server, "
        f"{args.rounds} round(s) pooled\n"
    )
    headers = ["load", "scheduler", "answered", "failed", "requests/s steady", "words/s steady"]
    headers += ["requests/s to the last answer"]
    headers += ["short p50 ms", "short p99 ms", "long p50 ms", "long p99 ms"]
    print(table(headers, rows))
    print(
        f"\ncapacity ({args.capacity_clients} clients back to back, requests/s): "
        + ", ".join(f"{k} {v:.2f}" for k, v in capacities.items())
    )
    print(
        "engine meanwhile (busy %, batches or steps per second, sentences per batch or step, "
        "engine ms per batch or step with a step's joins): "
        + "; ".join(
            f"{k} {b:.1f}%, {n:.1f}/s, {s:.1f}, {ms:.2f} ms" for k, (b, n, s, ms) in engines.items()
        )
    )
    print("peak resident memory: " + ", ".join(f"{k} {v:.0f} MB" for k, v in peaks.items()))
    for load in loads:
        s = results[(load, "static")]
        for name in list(variants)[1:]:
            r = results[(load, name)]
            ratio = percentile(r[0]["short"], 0.99) / percentile(s[0]["short"], 0.99)
            steady, words = (r[3][i] / s[3][i] if s[3][i] else float("nan") for i in (0, 1))
            print(
                f"{load:.0%}: {name} / static: short p99 {ratio:.2f}, steady requests/s "
                f"{steady:.2f}, steady words/s {words:.2f}"
            )
    return 0
