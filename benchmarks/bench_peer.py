"""Side by side with the public IntentusNet 1.3.0 (issue 25): same work, paired runs.

Run: python benchmarks/bench_peer.py [--rounds 5] [--fresh 5] [--quick]
         [--peer-venv PATH] [--disk DIR] [--tmpfs DIR] [--our-python PATH]

Both packages are named ``intentusnet``, so nothing is timed in this process:
every figure comes from a fresh process of one side. Our side runs this
checkout's code (``--our-python``, by default this interpreter, with the
checkout first on PYTHONPATH); the peer's side runs ``intentusnet==1.3.0`` from
a virtualenv of its own (``--peer-venv``, by default
~/.cache/intentusnet-bench/peer-1.3.0, made with ``python -m venv`` and ``pip
install`` the first time, then reused). The drivers, ``benchmarks/peer/ours.py``
and ``benchmarks/peer/theirs.py``, each drive their package's public API and
print one row's medians as JSON; ``first_route_ours.py`` and
``first_route_theirs.py`` beside them are a fresh process's first routed intent.

Each round runs every row's two sides one after the other (ours, then the
peer's), so a busy moment of the machine slows a pair alike; a row's ratio is
taken per pair, and the table gives the median of each side, the median ratio
and its range over ``--rounds`` rounds. The fresh-process rows time ``--fresh``
processes of each command per round, the commands taking turns, after two
warm-up runs each that write the bytecode caches; PYTHONDONTWRITEBYTECODE is
removed from both sides' environment, else every start would compile sources.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
DRIVERS = ROOT / "benchmarks" / "peer"
PEER_VERSION = "1.3.0"
DEFAULT_VENV = Path.home() / ".cache" / "intentusnet-bench" / f"peer-{PEER_VERSION}"


class Side(NamedTuple):
    """One package's interpreter, driver script and environment."""

    python: str
    driver: Path
    env: dict[str, str]

    def output(self, name: str, quick: bool, store: Path) -> str:
        """What the driver prints for row ``name``, its store at ``store``."""
        argv = [self.python, str(self.driver), name, "--dir", str(store)]
        if quick:
            argv.append("--quick")
        done = subprocess.run(
            argv,
            env=self.env,
            cwd=store.parent,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
        return done.stdout

    def row(self, name: str, quick: bool, store: Path) -> dict[str, float]:
        """The figures of row ``name`` (microseconds), from one driver run."""
        figures: dict[str, float] = json.loads(self.output(name, quick, store))
        return figures

    def record_one(self, store: Path) -> str:
        """Route one intent into a store at ``store``; the record's id."""
        found: dict[str, str] = json.loads(self.output("replay_setup", False, store))
        return found["id"]


def environment(pythonpath: Path | None) -> dict[str, str]:
    """This environment, bytecode caching on, PYTHONPATH only ``pythonpath``."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPATH", None)
    env.pop("INTENTUSNET_STORE", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def peer_python(venv: Path) -> str:
    """The python of ``venv`` holding intentusnet 1.3.0, made there if missing."""
    python = venv / "bin" / "python"  # POSIX only, as the store is
    if not python.exists():
        print(
            f"installing intentusnet=={PEER_VERSION} into {venv} ...", file=sys.stderr
        )
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, f"intentusnet=={PEER_VERSION}"], check=True)
    found = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m; print(m.version('intentusnet'))",
        ],
        env=environment(None),
        cwd=venv,  # not a checkout, whose *.egg-info `-c` would find first
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if found != PEER_VERSION:
        raise SystemExit(
            f"{venv} holds intentusnet {found or 'nothing'}, not {PEER_VERSION}"
        )
    return str(python)


def wall_ms(argv: list[str], env: dict[str, str], cwd: str) -> float:
    """Wall-clock milliseconds of running ``argv`` to completion (it must succeed)."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed:\n{done.stderr.decode()}")
    return elapsed


#: A row's target: from its medians and median ratio, its text and whether met.
Target = Callable[[dict[str, float], float | None], tuple[str, bool | None]]


def per_pair(medians: dict[str, float]) -> float:
    """Ours over the peer's."""
    return medians["ours"] / medians["peer"]


class Row(NamedTuple):
    """One line of the table: its key in the rounds' results, label and target."""

    key: str
    label: str
    unit: str
    target: Target
    other: str = "peer"  # the second column: "peer" or "floor"
    ratio: Callable[[dict[str, float]], float] = per_pair


def at_most(limit: float) -> Target:
    """A target on the ratio: at most ``limit``."""
    return lambda _m, ratio: (f"<= {limit}x", None if ratio is None else ratio <= limit)


def over_floor(ms: float) -> Target:
    """A target on the fresh-process time: at most the floor's + ``ms``."""

    def target(
        medians: dict[str, float], _ratio: float | None
    ) -> tuple[str, bool | None]:
        extra = medians["ours"] - medians["floor"]
        text = (
            f"<= floor + {ms:.0f} ms (floor {medians['floor']:.1f}; ours +{extra:.1f})"
        )
        return text, extra <= ms

    return target


def reported(_m: dict[str, float], _r: float | None) -> tuple[str, bool | None]:
    """No target: the figure is shown."""
    return "reported", None


def hash_share(medians: dict[str, float]) -> float:
    """The first hash's share (construction + hash, less construction) / floor."""
    return (medians["ours"] - medians["construct"]) / medians["floor"]


ROWS = [
    Row("route_small", "route_intent, no store, 2-byte payload", "us", at_most(0.7)),
    Row("route_1kb", "route_intent, no store, 1 KB payload", "us", at_most(0.7)),
    Row("record_tmpfs", "route + record, flush, tmpfs", "us", at_most(0.6)),
    Row("record_disk", "route + record, flush, disk", "us", at_most(0.8)),
    Row(
        "hash",
        "envelope + first compute_hash, 1 KB (ratio: hash share)",
        "us",
        at_most(2.5),
        other="floor",
        ratio=hash_share,
    ),
    Row(
        "load_first",
        "first load + verify + replay, small record (peer: + its envelope check)",
        "us",
        at_most(0.7),
    ),
    Row(
        "load_again",
        "repeated load + verify + replay, same record (peer: unchecked)",
        "us",
        at_most(0.5),
    ),
    Row(
        "first_route",
        "fresh process: import + first routed intent",
        "ms",
        over_floor(20),
    ),
    Row("first_route_less_pass", "  the same, less python -c pass", "ms", reported),
    Row("replay", "fresh process: intentusnet replay ID", "ms", over_floor(15)),
    Row("pass", "fresh process: python -c pass (each side's python)", "ms", reported),
]


def run(side: Side, name: str, quick: bool, where: Path) -> dict[str, float]:
    """One driver run of row ``name``, its store in a new folder under ``where``."""
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=where))
    try:
        return side.row(name, quick, folder / "store")
    finally:
        shutil.rmtree(folder)


def in_process_round(
    ours: Side, peer: Side, quick: bool, tmpfs: Path, disk: Path
) -> dict[str, dict[str, float]]:
    """One round of the rows timed inside a driver, each side in turn."""
    out: dict[str, dict[str, float]] = {}
    pairs = [
        ("route_small", "route_small", tmpfs),
        ("route_1kb", "route_1kb", tmpfs),
        ("record_tmpfs", "record", tmpfs),
        ("record_disk", "record", disk),
    ]
    for key, name, where in pairs:
        print(f"  {key}", file=sys.stderr)
        a, b = run(ours, name, quick, where), run(peer, name, quick, where)
        out[key] = {"ours": a["us"], "peer": b["us"]}
    print("  hash", file=sys.stderr)
    hashed = run(ours, "hash_1kb", quick, tmpfs)
    out["hash"] = {**hashed, "ours": hashed["us"]}
    print("  load", file=sys.stderr)
    a, b = run(ours, "load", quick, tmpfs), run(peer, "load", quick, tmpfs)
    out["load_first"] = {"ours": a["first"], "peer": b["first"]}
    out["load_again"] = {"ours": a["repeat"], "peer": b["repeat"]}
    return out


#: The first route's floor (issue 40): import pydantic, define one model with a
#: field, build and validate one instance of it.
PYDANTIC_FLOOR = (
    "from pydantic import BaseModel\n"
    "class M(BaseModel):\n"
    "    x: int\n"
    "M.model_validate({'x': 1})"
)


def fresh_commands(
    ours: Side, peer: Side, tmpfs: Path
) -> tuple[dict[str, tuple[list[str], dict[str, str]]], str]:
    """The fresh-process commands by key, and why the peer's replay is missing."""
    commands = {
        "first ours": ([ours.python, str(DRIVERS / "first_route_ours.py")], ours.env),
        "first peer": ([peer.python, str(DRIVERS / "first_route_theirs.py")], peer.env),
        "pydantic": ([ours.python, "-c", PYDANTIC_FLOOR], ours.env),
        "click": ([ours.python, "-c", "import click, orjson"], ours.env),
        "pass ours": ([ours.python, "-c", "pass"], ours.env),
        "pass peer": ([peer.python, "-c", "pass"], peer.env),
    }
    store = tmpfs / "replay-ours"
    execution_id = ours.record_one(store)
    cli = [ours.python, "-m", "intentusnet.cli", "--store", str(store)]
    commands["replay ours"] = ([*cli, "replay", execution_id], ours.env)
    store = tmpfs / "replay-peer"
    execution_id = peer.record_one(store)
    script = str(Path(peer.python).parent / "intentusnet")
    argv = [script, "--record-dir", str(store), "replay", execution_id]
    done = subprocess.run(
        argv, env=peer.env, capture_output=True, text=True, check=False
    )
    if done.returncode == 0:
        commands["replay peer"] = (argv, peer.env)
        return commands, ""
    last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return commands, f"n/a: fails ({last.split(':')[0]})"


def fresh_round(
    commands: dict[str, tuple[list[str], dict[str, str]]], runs: int, cwd: Path
) -> dict[str, dict[str, float]]:
    """One round of the fresh-process rows: ``runs`` of each command, taking turns."""
    samples: dict[str, list[float]] = {key: [] for key in commands}
    for _ in range(runs):
        for key, (argv, env) in commands.items():
            samples[key].append(wall_ms(argv, env, str(cwd)))
    ms = {key: statistics.median(times) for key, times in samples.items()}
    replay = {"ours": ms["replay ours"], "floor": ms["click"]}
    if "replay peer" in ms:
        replay["peer"] = ms["replay peer"]
    first = {"ours": ms["first ours"], "peer": ms["first peer"]}
    return {
        "first_route": {**first, "floor": ms["pydantic"]},
        "first_route_less_pass": {
            "ours": first["ours"] - ms["pass ours"],
            "peer": first["peer"] - ms["pass peer"],
        },
        "replay": replay,
        "pass": {"ours": ms["pass ours"], "peer": ms["pass peer"]},
    }


def table(
    rounds: list[dict[str, dict[str, float]]], notes: dict[str, str]
) -> list[list[str]]:
    """The printed table's lines: medians, ratio median and range, target, met."""
    lines = [["row", "ours", "peer / floor", "ratio (median, range)", "target", "met?"]]
    for row in ROWS:
        measured = [r[row.key] for r in rounds]
        medians = {
            key: statistics.median(m[key] for m in measured) for key in measured[0]
        }
        ours = f"{medians['ours']:.1f} {row.unit}"
        other, ratio_text, ratio = notes.get(row.key, "n/a"), "n/a", None
        if row.other in medians:
            other = f"{medians[row.other]:.1f} {row.unit}"
            other += " (floor)" if row.other == "floor" else ""
            ratios = [row.ratio(m) for m in measured]
            ratio = statistics.median(ratios)
            ratio_text = f"{ratio:.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
        target, met = row.target(medians, ratio)
        verdict = {True: "yes", False: "**no**", None: "-"}[met]
        lines.append([row.label, ours, other, ratio_text, target, verdict])
    return lines


def print_table(lines: list[list[str]]) -> None:
    """Print ``lines`` as a Markdown table, columns padded to their widest cell."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    for n, line in enumerate(lines):
        print(
            "| "
            + " | ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True))
            + " |"
        )
        if n == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def main() -> None:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=int, default=5, help="paired rounds (default 5)"
    )
    parser.add_argument(
        "--fresh", type=int, default=5, help="fresh processes a command, a round"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 1 round, few calls"
    )
    parser.add_argument(
        "--peer-venv",
        type=Path,
        default=DEFAULT_VENV,
        metavar="PATH",
        help="made if missing",
    )
    parser.add_argument(
        "--disk",
        type=Path,
        default=ROOT,
        metavar="DIR",
        help="disk stores go under DIR",
    )
    parser.add_argument(
        "--tmpfs",
        type=Path,
        default=Path("/dev/shm"),
        metavar="DIR",
        help="tmpfs stores go under DIR",
    )
    parser.add_argument(
        "--our-python",
        default=sys.executable,
        metavar="PATH",
        help="our side's interpreter",
    )
    args = parser.parse_args()
    rounds, runs = (1, 1) if args.quick else (max(args.rounds, 1), max(args.fresh, 1))
    ours = Side(args.our_python, DRIVERS / "ours.py", environment(ROOT))
    peer = Side(
        peer_python(args.peer_venv.expanduser()),
        DRIVERS / "theirs.py",
        environment(None),
    )
    print(f"load average {os.getloadavg()[0]:.2f}; {rounds} rounds", file=sys.stderr)
    tmpfs = Path(tempfile.mkdtemp(prefix="bench-peer-", dir=args.tmpfs))
    disk = Path(tempfile.mkdtemp(prefix=".bench-peer-", dir=args.disk))
    try:
        commands, why = fresh_commands(ours, peer, tmpfs)
        for argv, env in commands.values():  # write the bytecode caches, fill the OS's
            for _ in range(2):
                wall_ms(argv, env, str(tmpfs))
        results = []
        for n in range(rounds):
            print(f"round {n + 1} of {rounds}", file=sys.stderr)
            measured = in_process_round(ours, peer, args.quick, tmpfs, disk)
            print(f"  fresh processes ({runs} of each command)", file=sys.stderr)
            measured.update(fresh_round(commands, runs, tmpfs))
            results.append(measured)
    finally:
        shutil.rmtree(tmpfs)
        shutil.rmtree(disk)
    print(f"IntentusNet {PEER_VERSION} (peer) against this checkout, {ROOT}")
    print(f"ours: {ours.python}; peer: {peer.python}")
    end = os.getloadavg()[0]
    print(f"tmpfs {args.tmpfs}, disk {args.disk}; load average at the end {end:.2f}")
    print_table(table(results, {"replay": why}))


if __name__ == "__main__":
    main()
