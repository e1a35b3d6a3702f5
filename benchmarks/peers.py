"""The real peers on one stream: Flink ML's ``OnlineLogisticRegression`` (apache-flink-ml 2.3.0,
Flink 1.17.1), River's ``LogisticRegression`` (0.26.1) and our replicas, each training the same
logistic regression on the ingestion benchmark's stream (benchmarks/ingestion_job.py).

    python -m benchmarks.peers --json runs/peers.json                  # about 25 minutes
    python -m benchmarks.peers --systems river,ours --batch-sizes 64 --repeats 1

The side environments come from PyPI the first time, into ``--envs`` (default ``.peers/``, not
committed): Flink ML installs only on Python 3.7 or 3.8 (found as ``--python38``, ``python3.8`` on
the PATH or a pyenv version; without one Flink ML is skipped, with the reason in the output), River
beside this interpreter. Flink 1.17 on Java 17 needs ``--add-opens`` flags, passed through
``JDK_JAVA_OPTIONS``.

Each figure is marginal: every run is made at two stream lengths (``--lengths``) and examples/s
is their difference over the difference of the runs' wall times (River: of its ``learn_one``
loops), so start-up cost drops out. Each system is tried at each global batch size of
``--batch-sizes`` once (River has none); then ``--repeats`` runs in all at its best one, the
systems in turn. Rows ``{system, input, replicas, batch_size, examples_per_s, heldout_accuracy}``
(medians with their spread), plus each system's best.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from typing import List, Optional

from benchmarks.ingestion import spread

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
FLINK_ML = ("apache-flink-ml==2.3.0",)  # pulls apache-flink==1.17.1 and its jars
RIVER = ("river==0.26.1", "numpy")
SYSTEMS = ("flinkml", "river", "ours")
JAVA_17_OPENS = ("java.util", "java.lang", "java.lang.reflect", "java.io", "java.net", "java.nio", "sun.nio.ch",
                 "java.text", "java.time", "java.util.concurrent", "java.util.concurrent.atomic",
                 "java.util.concurrent.locks", "java.lang.invoke", "java.math")


class Skipped(Exception):
    """A system that cannot run here, and why."""


def find_python38(given: Optional[str]) -> str:
    candidates = [given, os.environ.get("PEERS_PYTHON38"), shutil.which("python3.8"), shutil.which("python3.7"),
                  *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")), reverse=True)]
    for candidate in candidates:
        if candidate and os.path.exists(candidate):
            return candidate
    raise Skipped("no Python 3.7 or 3.8 here (apache-flink-ml 2.3.0 installs on no other): give one with "
                  "--python38 or PEERS_PYTHON38")


def side_environment(folder: str, python: str, packages, out) -> str:
    """The interpreter of a virtual environment in ``folder`` with ``packages``, made once."""
    interpreter = os.path.join(folder, "bin", "python")
    marker = os.path.join(folder, ".installed")
    if os.path.exists(marker) and open(marker).read() == " ".join(packages):
        return interpreter
    print(f"building {folder} ({' '.join(packages)}): a few minutes, once", file=out, flush=True)
    subprocess.run([python, "-m", "venv", "--clear", folder], check=True)
    subprocess.run([interpreter, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *packages], check=True)
    with open(marker, "w") as f:
        f.write(" ".join(packages))
    return interpreter


def _java_options() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("_PYFLINK")}
    env["JDK_JAVA_OPTIONS"] = " ".join(f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in JAVA_17_OPENS)
    return env


def _run(command: List[str], env=None) -> dict:
    """The last JSON line a command printed, with its wall time as ``wall_s``."""
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    line = [l for l in done.stdout.splitlines() if l.startswith("{")][-1]
    return {**json.loads(line), "wall_s": wall}


def one_run(system: str, interpreter: str, examples: int, batch_size: int, inputs: str) -> dict:
    if system == "flinkml":
        return _run([interpreter, os.path.join(HERE, "peers_flinkml.py"), "--examples", str(examples),
                     "--batch-size", str(batch_size)], env=_java_options())
    if system == "river":
        return _run([interpreter, os.path.join(HERE, "peers_river.py"), "--examples", str(examples)])
    from pyflink_tensair.cluster import client_environment

    summary = os.path.join(ROOT, ".peers", f"ours-{os.getpid()}.json")
    os.makedirs(os.path.dirname(summary), exist_ok=True)
    return _run([interpreter, os.path.join(HERE, "ingestion_job.py"), "--path", inputs, "--examples", str(examples),
                 "--batch-size", str(batch_size), "--summary", summary], env=client_environment())


def marginal(system, interpreter, lengths, batch_size, inputs) -> dict:
    """Examples/s between two lengths (``None`` when the longer run took no longer: the lengths are
    too close for this machine's noise), and the longer run's accuracy."""
    short, long_ = (one_run(system, interpreter, n, batch_size, inputs) for n in lengths)
    seconds = "seconds" if system == "river" else "wall_s"
    extra = long_[seconds] - short[seconds]
    rate = (lengths[1] - lengths[0]) / extra if extra > 0 else None
    return {"examples_per_s": rate, "heldout_accuracy": long_["heldout_accuracy"], "runs": [short, long_]}


def _rate(run) -> float:
    return run["examples_per_s"] if run["examples_per_s"] is not None else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated of {', '.join(SYSTEMS)}")
    parser.add_argument("--inputs", default="json,rows", help="ours: comma-separated input paths (default json,rows)")
    parser.add_argument("--batch-sizes", default="64,256,1024", help="global batch sizes to try (default 64,256,1024)")
    parser.add_argument("--lengths", default="62400,312000", help="the two stream lengths (default 62400,312000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs at each system's best batch size (default 3)")
    parser.add_argument("--envs", default=os.path.join(ROOT, ".peers"), help="where the side environments go")
    parser.add_argument("--python38", help="a Python 3.7 or 3.8 for Flink ML (default: found)")
    parser.add_argument("--json", help="write the rows and every run here")
    args = parser.parse_args(argv)
    systems = args.systems.split(",")
    if not set(systems) <= set(SYSTEMS):
        parser.error(f"--systems takes {', '.join(SYSTEMS)}; received {args.systems}")
    lengths = [int(n) for n in args.lengths.split(",")]
    if len(lengths) != 2 or not 0 < lengths[0] < lengths[1]:
        parser.error(f"--lengths takes two growing lengths; received {args.lengths}")
    sizes = [int(b) for b in args.batch_sizes.split(",")]

    configs, skipped = [], {}
    for system in systems:
        try:
            if system == "flinkml":
                interpreter = side_environment(os.path.join(args.envs, "flinkml"), find_python38(args.python38), FLINK_ML,
                                               sys.stdout)
            elif system == "river":
                interpreter = side_environment(os.path.join(args.envs, "river"), sys.executable, RIVER, sys.stdout)
            else:
                interpreter = sys.executable
        except (Skipped, subprocess.CalledProcessError) as err:
            skipped[system] = str(err)
            print(f"{system}: skipped: {err}", flush=True)
            continue
        for inputs in (args.inputs.split(",") if system == "ours" else [None]):
            configs.append((system, inputs, interpreter, [None] if system == "river" else sizes))

    results: dict = {}
    for system, inputs, interpreter, candidates in configs:  # each batch size once
        for size in candidates:
            got = marginal(system, interpreter, lengths, size or 0, inputs)
            results.setdefault((system, inputs, size), []).append(got)
            print(f"{system} {inputs or ''} batch {size}: {_rate(got):,.0f} examples/s, "
                  f"accuracy {got['heldout_accuracy']:.4f}", flush=True)
    best = {(system, inputs): max(candidates, key=lambda s: results[(system, inputs, s)][0]["examples_per_s"] or 0.0)
            for system, inputs, _, candidates in configs}
    for repeat in range(1, args.repeats):  # the systems in turn at their best
        for system, inputs, interpreter, _ in configs:
            size = best[(system, inputs)]
            got = marginal(system, interpreter, lengths, size or 0, inputs)
            results[(system, inputs, size)].append(got)
            print(f"repeat {repeat + 1}: {system} {inputs or ''} batch {size}: {_rate(got):,.0f} examples/s",
                  flush=True)
    rows = []
    for (system, inputs, size), runs in results.items():
        rows.append({"system": {"flinkml": "flink-ml 2.3.0", "river": "river 0.26.1", "ours": "pyflink_tensair"}[system],
                     "input": inputs or ("Rows (vector, label)" if system == "flinkml" else "dicts, learn_one"),
                     "replicas": 1, "batch_size": size, "best": best[(system, inputs)] == size,
                     "examples_per_s": spread([r["examples_per_s"] for r in runs if r["examples_per_s"] is not None]
                                              or [float("nan")]),
                     "unmeasured": sum(r["examples_per_s"] is None for r in runs),
                     "heldout_accuracy": spread([r["heldout_accuracy"] for r in runs]), "repeats": len(runs)})
    for row in rows:
        rate = row["examples_per_s"]
        print(f"{row['system']:>16} {row['input']:>22} batch {str(row['batch_size']):>5}{' (best)' if row['best'] else '':7} "
              f"{rate['median']:>10,.0f} [{rate['min']:,.0f}, {rate['max']:,.0f}] examples/s x{row['repeats']}, "
              f"accuracy {row['heldout_accuracy']['median']:.4f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"lengths": lengths, "rows": rows, "skipped": skipped,
                       "runs": [{"system": k[0], "input": k[1], "batch_size": k[2], "runs": v} for k, v in results.items()]},
                      f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
