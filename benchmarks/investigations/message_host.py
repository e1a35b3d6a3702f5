"""What a large peer message costs the host, and four ways to cut it, taking turns in one run (issue 27).

Each variant is one unpaced run of the probe job (``benchmarks.replica_path``'s candidate runner,
replicas in the TaskManager's JVM) with a different process environment or job option; every
repeat runs every variant once, so the figures compare within a run::

    python -m benchmarks.investigations.message_host --workload sparse --replicas 4 --repeats 3 --variants base,object-reuse,float16
    python -m benchmarks.investigations.message_host --workload sparse --replicas 2 --repeats 3 --variants base,g1-regions-32m,malloc-no-trim

Variants: ``base`` (the defaults); ``g1-regions-32m`` (``JVM_ARGS=-XX:G1HeapRegionSize=32m``: a
7.6 MB byte array is no humongous object); ``malloc-no-trim`` (glibc keeps freed memory: no
fresh pages for every large buffer); ``object-reuse`` (``pipeline.object-reuse``: chained
operators pass a record on without copying it); ``float16`` (``TrainConfig.sparse_values``:
half the bytes). A one-off: its answer is in docs/measurements.md, "What a peer message costs the host".
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Dict, List

VARIANTS: Dict[str, dict] = {
    "base": {},
    "g1-regions-32m": {"env": {"JVM_ARGS": "-XX:G1HeapRegionSize=32m"}},
    "malloc-no-trim": {"env": {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "1073741824",
                               "MALLOC_TOP_PAD_": "67108864"}},
    "object-reuse": {"args": ["--option", "pipeline.object-reuse=true"]},
    "float16": {"args": ["--sparse-values", "float16"]},
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=["dense", "sparse"], default="sparse")
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--variants", default="base,object-reuse,float16", help="comma-separated: " + ", ".join(VARIANTS))
    args = parser.parse_args(argv)
    names = [n for n in args.variants.split(",") if n]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {sorted(VARIANTS)}")

    from benchmarks.replica_path import run_candidate
    from benchmarks.throughput.run import Spec

    spec = Spec(limit_batches=60, probe_timeout_s=900)
    before = dict(os.environ)
    rates: Dict[str, List[float]] = {n: [] for n in names}
    try:
        for repeat in range(args.repeats):
            for name in names:
                os.environ.clear()
                os.environ.update(before)
                os.environ.update(VARIANTS[name].get("env", {}))
                got = run_candidate(spec, args.workload, args.replicas, args.batches, VARIANTS[name].get("args", []))
                rates[name].append(got["rate"])
                print(f"repeat {repeat} {name}: {got['rate']:.2f} batches/s, per batch ms {got['profile']}, "
                      f"CPU ms per batch {got['cpu_ms_per_batch']}", flush=True)
    finally:
        os.environ.clear()
        os.environ.update(before)
    print(f"{args.workload}, {args.replicas} replicas: batches/s, median [min, max] of {args.repeats}")
    for name, values in rates.items():
        print(f"  {name:16s} {statistics.median(values):.2f} [{min(values):.2f}, {max(values):.2f}]")


if __name__ == "__main__":
    main()
