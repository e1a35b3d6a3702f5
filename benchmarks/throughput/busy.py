"""Where a replica's time goes: unpaced runs of one system, against the plain loop's step time.

For each workload and replica count: the rate the system reaches when the source is not paced,
each replica's share of wall time spent inside its model (``Metrics.model_busy_s``), and the plain
loop's rate on one core. A replica whose model is busy a fraction ``f`` of the time while the
loop reaches rate ``L`` per core is bounded by ``f x L`` per replica: ``1 - f`` is the runtime's share.

    python -m benchmarks.throughput.busy --workloads dense,sparse --replicas 1,2 --json benchmarks/results/profile.json
"""

from __future__ import annotations

import argparse
import json

from .run import Spec, _rate, _run_probe, busy_fraction, run_limit


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", default="dasgd")
    parser.add_argument("--workloads", default="dense,sparse")
    parser.add_argument("--replicas", default="1,2")
    parser.add_argument("--batches", type=int, default=120)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    spec = Spec()
    rows = []
    for workload in args.workloads.split(","):
        limit = run_limit(spec, workload, 1)["sustainable_rate"]  # one plain loop in one process
        for replicas in [int(r) for r in args.replicas.split(",")]:
            result = _run_probe(spec, args.system, workload, replicas, 0.0, args.batches, "local", None)
            records = result["records"][len(result["records"]) // 5:]  # past the compile of the first steps
            rate, busy = _rate(records), busy_fraction(records)
            row = {"system": args.system, "workload": workload, "replicas": replicas, "unpaced_rate": round(rate, 2),
                   "model_busy_fraction": busy, "limit_one_core": limit,
                   "rate_per_replica_over_limit": round(rate / replicas / limit, 3), "peak_memory_mb": result["peak_memory_mb"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
