"""Final loss of DASGD (and a bounded variant) against synchronous SGD on the same stream, one run each.

Runs ``jobs/quickstart.py`` once per staleness bound on the same batches and prints each run's
prequential final loss (mean over the last 10% of batches) and held-out loss, with ratios to the
synchronous run:

    python -m benchmarks.investigations.convergence --batches 1000 --replicas 2

A one-off (issue 2): its answer is in docs/measurements.md, "DASGD against synchronous SGD, same
stream"; ``benchmarks.learning_quality`` compares the settings of every use-case job now.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

from benchmarks.jobrun import run_job

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_quickstart(staleness: str, args, folder: str) -> dict:
    from pyflink_tensair.cluster import client_environment

    return run_job(os.path.join(ROOT, "jobs", "quickstart.py"),
                   ["--replicas", str(args.replicas), "--staleness-bound", staleness, "--batches", str(args.batches),
                    "--seed", str(args.seed), "--outdir", os.path.join(folder, f"run-{staleness}")],
                   timeout=None, env=client_environment())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--staleness-bounds", nargs="+", default=["0", "none", "4"], help="the runs' staleness bounds; the first is the reference")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="tensair-convergence-")
    runs = {bound: run_quickstart(bound, args, folder) for bound in args.staleness_bounds}
    reference = runs[args.staleness_bounds[0]]
    rows = []
    for bound, s in runs.items():
        rows.append({"staleness_bound": bound, "final_loss": round(s["final_loss"], 4), "holdout_loss": round(s["holdout_loss"], 4),
                     "final_loss_over_reference": round(s["final_loss"] / reference["final_loss"], 3),
                     "holdout_loss_over_reference": round(s["holdout_loss"] / reference["holdout_loss"], 3),
                     "max_staleness": s["max_staleness"], "bound_overflows": s["bound_overflows"],
                     "batches_per_s": round(s["batches_per_s"], 1),
                     "replica_max_weight_diff": s["replica_max_weight_diff"]})
    figures = {"batches": args.batches, "replicas": args.replicas, "seed": args.seed, "runs": rows}
    print(json.dumps(figures, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
