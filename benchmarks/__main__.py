"""``python -m benchmarks run|report``: the sustainable-throughput benchmark (see benchmarks/throughput).

    python -m benchmarks run --quick                                   # a few minutes (CI runs it)
    python -m benchmarks run --results benchmarks/results/throughput.jsonl
    python -m benchmarks run --spec my_spec.json                       # fields of throughput.run.Spec
    python -m benchmarks report --results benchmarks/results/throughput.jsonl --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

DEFAULT_RESULTS = os.path.join("benchmarks", "results", "throughput.jsonl")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="probe rates and write one JSON record per run")
    p_run.add_argument("--spec", metavar="JSON", help="a JSON file of Spec fields (systems, workloads, replicas, modes, seconds, ...)")
    p_run.add_argument("--quick", action="store_true", help="a small spec that runs in a few minutes")
    p_run.add_argument("--systems", help="comma-separated subset of: dasgd,bounded,sync,flinkml,flinkml_full,single,limit")
    p_run.add_argument("--workloads", help="comma-separated: dense,sparse,words,clicks")
    p_run.add_argument("--replicas", help="comma-separated replica counts, e.g. 1,2")
    p_run.add_argument("--modes", help="comma-separated: local,cluster")
    p_run.add_argument("--seconds", type=float, help="arrival seconds per probe")
    p_run.add_argument("--python-in", choices=["jvm", "processes"],
                       help="where every system's training operators run (TrainConfig.python_in; default: jvm)")
    p_run.add_argument("--source-python-in", choices=["jvm", "processes"],
                       help="where every system's batches are made (the python_in of batch_source's config; default: jvm)")
    p_run.add_argument("--bisections", type=int, help="bisection steps after the doubling (each halves the bracket)")
    p_run.add_argument("--results", default=DEFAULT_RESULTS, help=f"JSON lines to append to (default: {DEFAULT_RESULTS})")
    p_report = sub.add_parser("report", help="write docs/benchmarks.md and PNG plots from results")
    p_report.add_argument("--results", default=DEFAULT_RESULTS)
    p_report.add_argument("--out", default=os.path.join("docs", "benchmarks.md"))
    p_report.add_argument("--command", dest="run_command", help="the command that produced the results (for the header)")
    args = parser.parse_args(argv)

    if args.command == "run":
        from benchmarks.throughput.probe_job import PYTHON_IN, SYSTEMS
        from benchmarks.throughput.run import Spec, run
        from benchmarks.throughput.workloads import NAMES

        spec = Spec.quick() if args.quick else Spec()
        if args.spec:
            with open(args.spec) as f:
                fields = json.load(f)
            wrong = Spec.unknown_fields(fields)
            if wrong:
                parser.error(f"{args.spec}: " + "; ".join(wrong))
            spec = Spec(**{**vars(spec), **fields})
        for name, convert in (("systems", str), ("workloads", str), ("replicas", int), ("modes", str)):
            value = getattr(args, name)
            if value:
                setattr(spec, name, [convert(v) for v in value.split(",") if v])
        if args.seconds:
            spec.seconds = args.seconds
        if args.python_in:
            spec.python_in = args.python_in
        if args.source_python_in:
            spec.source_python_in = args.source_python_in
        if args.bisections is not None:
            spec.bisections = args.bisections
        bad = [s for s in spec.systems if s not in SYSTEMS] + [w for w in spec.workloads if w not in NAMES] \
            + [m for m in spec.modes if m not in ("local", "cluster")] + [r for r in spec.replicas if r < 1] \
            + [p for p in (spec.python_in, spec.source_python_in) if p not in PYTHON_IN]
        if bad:
            parser.error(f"unknown systems, workloads, modes, replica counts or python_in values: {bad}")
        import signal

        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up (the cluster is stopped by PID)
        print(f"benchmark spec: {json.dumps(vars(spec))}", flush=True)
        started = time.time()
        records = run(spec, args.results, log=lambda line: print(line, flush=True))
        failed = [r for r in records if "error" in r]
        print(f"{len(records)} runs ({len(failed)} failed) in {time.time() - started:.0f} s; results appended to {args.results}")
        return 0
    from benchmarks.throughput.report import write_report

    write_report(args.results, args.out, command=args.run_command)
    print(f"report written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
