"""The real peers on one stream: Flink ML's ``OnlineLogisticRegression`` (apache-flink-ml 2.3.0,
Flink 1.17.1), River's ``LogisticRegression`` (0.26.1) and our replicas, each training the same
logistic regression on the ingestion benchmark's stream (benchmarks/ingestion_job.py).

    python -m benchmarks.peers --json runs/peers.json                  # about 50 minutes
    python -m benchmarks.peers --systems river,ours --batch-sizes 64 --repeats 1

The side environments come from PyPI the first time, into ``--envs`` (default ``.peers/``, not
committed): Flink ML installs only on Python 3.7 or 3.8 (found as ``--python38``, ``python3.8`` on
the PATH or a pyenv version; without one Flink ML is skipped, with the reason in the output), River
beside this interpreter. Flink 1.17 on Java 17 needs ``--add-opens`` flags, passed through
``JDK_JAVA_OPTIONS``.

The stream is read from a file of JSON lines by every system (``--source file``, the default;
written once per length into ``--envs``): Flink ML through the Table API's filesystem connector,
ours as text lines (``FileSource``, ``to_batches(parse=json_example)``) and as a table's rows
(``batches_from_table``), River line by line with ``json.loads``. ``--source collection`` makes the
stream in each client instead (``env.from_collection``; River from a list of dicts), which then
measures ``from_collection`` as much as the training. System ``source`` is the ceiling of the
table path: the same file's table read by Flink 1.17 into a blackhole sink, nothing trained.

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
SYSTEMS = ("flinkml", "river", "ours", "source")
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


def stream_file(folder: str, examples: int) -> str:
    """The stream's first ``examples`` as JSON lines in ``folder``, written once."""
    from benchmarks.ingestion_job import json_text, linear_examples

    path = os.path.join(folder, f"stream-{examples}.jsonl")
    if not os.path.exists(path):
        x, y = linear_examples(examples)
        with open(path + ".part", "w", encoding="utf-8") as f:
            f.writelines(json_text(features, label) + "\n" for features, label in zip(x, y))
        os.replace(path + ".part", path)
    return path


def one_run(system: str, interpreter: str, examples: int, batch_size: int, inputs: str, source: Optional[str]) -> dict:
    """One run; ``source`` is the stream's file, or ``None`` to make it in the client."""
    read = ["--from-file", source] if source else []
    if system == "flinkml":
        return _run([interpreter, os.path.join(HERE, "peers_flinkml.py"), "--examples", str(examples),
                     "--batch-size", str(batch_size), *read], env=_java_options())
    if system == "river":
        return _run([interpreter, os.path.join(HERE, "peers_river.py"), "--examples", str(examples), *read])
    if system == "source":
        return _run([interpreter, os.path.join(HERE, "peers_flinkml.py"), "--examples", str(examples), "--read-only",
                     *read], env=_java_options())
    from pyflink_tensair.cluster import client_environment

    summary = os.path.join(ROOT, ".peers", f"ours-{os.getpid()}.json")
    os.makedirs(os.path.dirname(summary), exist_ok=True)
    return _run([interpreter, os.path.join(HERE, "ingestion_job.py"), "--path", inputs, "--examples", str(examples),
                 "--batch-size", str(batch_size), "--summary", summary, *read], env=client_environment())


def marginal(system, interpreter, lengths, batch_size, inputs, sources) -> dict:
    """Examples/s between two lengths (``None`` when the longer run took no longer: the lengths are
    too close for this machine's noise), the longer run's rate inside the job, and its accuracy."""
    short, long_ = (one_run(system, interpreter, n, batch_size, inputs, source) for n, source in zip(lengths, sources))
    seconds = "seconds" if system == "river" else "wall_s"
    extra = long_[seconds] - short[seconds]
    rate = (lengths[1] - lengths[0]) / extra if extra > 0 else None
    in_job = long_.get("in_job_examples_per_s", long_.get("examples_per_s") if system == "ours" else None)
    if "heldout_accuracy" not in long_:  # the source alone
        long_["heldout_accuracy"] = float("nan")
    return {"examples_per_s": rate, "in_job_examples_per_s": in_job, "heldout_accuracy": long_["heldout_accuracy"],
            "runs": [short, long_]}


def input_name(system: str, inputs: Optional[str], source: str) -> str:
    if source == "file":
        return {"flinkml": "table rows, JSON file", "river": "json.loads, learn_one", "source": "table rows, discarded",
                "ours": {"json": "JSON text, file", "rows": "table rows, JSON file"}.get(inputs, inputs)}[system]
    return inputs or ("Rows (vector, label)" if system == "flinkml" else "dicts, learn_one")


def against_flinkml(results: dict, best: dict) -> dict:
    """Our examples/s over Flink ML's, repeat by repeat (the systems ran in turn within each
    repeat), at each one's best batch size: ``{input: {pairs, median, min, max}}``."""
    if ("flinkml", None) not in best:
        return {}
    theirs = results[("flinkml", None, best[("flinkml", None)])]
    out = {}
    for (system, inputs), size in best.items():
        if system != "ours":
            continue
        pairs = [o["examples_per_s"] / f["examples_per_s"] for o, f in zip(results[(system, inputs, size)], theirs)
                 if o["examples_per_s"] and f["examples_per_s"]]
        if pairs:
            out[inputs] = {"pairs": pairs, **spread(pairs)}
    return out


def _rate(run) -> float:
    return run["examples_per_s"] if run["examples_per_s"] is not None else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated of {', '.join(SYSTEMS)}")
    parser.add_argument("--inputs", default="json,rows", help="ours: comma-separated input paths (default json,rows)")
    parser.add_argument("--batch-sizes", default="64,256,1024", help="global batch sizes to try (default 64,256,1024)")
    parser.add_argument("--lengths", default="62400,1248000", help="the two stream lengths (default 62400,1248000)")
    parser.add_argument("--source", choices=("file", "collection"), default="file",
                        help="the stream from a file of JSON lines (default) or made in each client")
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
    os.makedirs(args.envs, exist_ok=True)
    sources = [stream_file(args.envs, n) if args.source == "file" else None for n in lengths]

    configs, skipped = [], {}
    for system in systems:
        try:
            if system == "source" and args.source != "file":
                raise Skipped("the source's ceiling is measured with --source file")
            if system in ("flinkml", "source"):
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
            configs.append((system, inputs, interpreter, [None] if system in ("river", "source") else sizes))

    results: dict = {}
    for system, inputs, interpreter, candidates in configs:  # each batch size once
        for size in candidates:
            got = marginal(system, interpreter, lengths, size or 0, inputs, sources)
            results.setdefault((system, inputs, size), []).append(got)
            print(f"{system} {inputs or ''} batch {size}: {_rate(got):,.0f} examples/s, "
                  f"in the job {got['in_job_examples_per_s'] or float('nan'):,.0f}, "
                  f"accuracy {got['heldout_accuracy']:.4f}", flush=True)
    best = {(system, inputs): max(candidates, key=lambda s: results[(system, inputs, s)][0]["examples_per_s"] or 0.0)
            for system, inputs, _, candidates in configs}
    for repeat in range(1, args.repeats):  # the systems in turn at their best
        for system, inputs, interpreter, _ in configs:
            size = best[(system, inputs)]
            got = marginal(system, interpreter, lengths, size or 0, inputs, sources)
            results[(system, inputs, size)].append(got)
            print(f"repeat {repeat + 1}: {system} {inputs or ''} batch {size}: {_rate(got):,.0f} examples/s",
                  flush=True)
    rows = []
    for (system, inputs, size), runs in results.items():
        rows.append({"system": {"flinkml": "flink-ml 2.3.0", "river": "river 0.26.1", "ours": "pyflink_tensair",
                                "source": "flink 1.17 table source"}[system],
                     "input": input_name(system, inputs, args.source),
                     "replicas": 1, "batch_size": size, "best": best[(system, inputs)] == size,
                     "examples_per_s": spread([r["examples_per_s"] for r in runs if r["examples_per_s"] is not None]
                                              or [float("nan")]),
                     "unmeasured": sum(r["examples_per_s"] is None for r in runs),
                     "in_job_examples_per_s": spread([r["in_job_examples_per_s"] for r in runs
                                                      if r["in_job_examples_per_s"] is not None] or [float("nan")]),
                     "heldout_accuracy": spread([r["heldout_accuracy"] for r in runs]), "repeats": len(runs)})
    for row in rows:
        rate, in_job = row["examples_per_s"], row["in_job_examples_per_s"]
        print(f"{row['system']:>16} {row['input']:>26} batch {str(row['batch_size']):>5}{' (best)' if row['best'] else '':7} "
              f"{rate['median']:>10,.0f} [{rate['min']:,.0f}, {rate['max']:,.0f}] examples/s x{row['repeats']}, "
              f"in the job {in_job['median']:,.0f}, accuracy {row['heldout_accuracy']['median']:.4f}")
    ratios = against_flinkml(results, best)
    for inputs, pairs in ratios.items():
        print(f"ours {inputs} / flink-ml, repeat by repeat: {', '.join(f'{r:.2f}' for r in pairs['pairs'])}; "
              f"median {pairs['median']:.2f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"lengths": lengths, "rows": rows, "skipped": skipped, "against_flinkml": ratios,
                       "runs": [{"system": k[0], "input": k[1], "batch_size": k[2], "runs": v} for k, v in results.items()]},
                      f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
