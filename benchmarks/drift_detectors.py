"""Drift detectors on generated streams with known drift points: delay, false positives, missed drifts.

    python -m benchmarks.drift_detectors --out docs/drift.md          # about a minute
    python -m benchmarks.drift_detectors --seeds 2 --length-scale 0.2  # a quick look

Streams (:mod:`pyflink_tensair.testing.drift_streams`): ``gaussian`` values (a loss; standard
deviation 1, the mean steps up by the magnitude at each drift) and ``binary`` values (0/1 errors,
the error rate steps up from 0.1), drifts abrupt or gradual (over 500 values), every 5,000
values, 4 drifts per stream; and streams without drift (100,000 values) for the false-positive
rate at rest. Each row sums ``--seeds`` streams. Detectors: OPTWIN at the paper's confidence
(0.999) with rigor 0.5 (the default) and 0.1, and Page-Hinkley with River's and MOA's defaults.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Dict, List

from pyflink_tensair import drift
from pyflink_tensair.testing.drift_streams import detections, generate, score

DETECTORS = {
    "OPTWIN (rigor 0.5)": ("optwin", {"rigor": 0.5}),
    "OPTWIN (rigor 0.1)": ("optwin", {"rigor": 0.1}),
    "Page-Hinkley": ("page_hinkley", {}),
}
DRIFTING = [(values, shape, magnitude) for values, magnitudes in (("gaussian", (0.25, 0.5, 1.0)), ("binary", (0.05, 0.1, 0.2)))
            for shape in ("abrupt", "gradual") for magnitude in magnitudes]
AT_REST = [("gaussian", "none", 0.0), ("binary", "none", 0.0)]


def evaluate(seeds: int, length_scale: float = 1.0, log=print) -> List[dict]:
    every, drifts = max(int(5000 * length_scale), 1000), 4
    rows = []
    for values, shape, magnitude in DRIFTING + AT_REST:
        length = every * (drifts + 1) if shape != "none" else max(int(100_000 * length_scale), every)
        streams = [generate(values, shape, magnitude=magnitude, length=length, drift_every=every, seed=seed,
                            base=0.1 if shape != "none" else 0.2) for seed in range(seeds)]
        for label, (kind, parameters) in DETECTORS.items():
            began = time.perf_counter()
            scores = [score(detections(drift.make(kind, **parameters), s), s) for s in streams]
            elapsed = time.perf_counter() - began
            delays = [d for s in scores for d in s["delays"]]
            total = sum(len(s.values) for s in streams)
            row = {"values": values, "shape": shape, "magnitude": magnitude, "detector": label, "streams": seeds,
                   "drifts": sum(s["drifts"] for s in scores), "missed": sum(s["missed"] for s in scores),
                   "false_positives": sum(s["false_positives"] for s in scores), "values_seen": total,
                   "median_delay": statistics.median(delays) if delays else None,
                   "mean_delay": round(statistics.mean(delays), 1) if delays else None,
                   "us_per_value": round(elapsed / total * 1e6, 2)}
            row["false_positives_per_10k"] = round(row["false_positives"] / total * 10_000, 3)
            rows.append(row)
            log(f"  {values} {shape} {magnitude:g} {label}: missed {row['missed']}/{row['drifts']}, "
                f"delay {row['median_delay']}, FP/10k {row['false_positives_per_10k']}")
    return rows


def markdown(rows: List[dict], command: str, began: str) -> str:
    def cell(value):
        return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)

    lines = ["# Drift detectors on streams with known drift points", "",
             f"Command: `{command}`  ", f"Date: {began}", "", __doc__.split("\n\n", 2)[2].strip(), "",
             "A drift counts as detected by the first detection from its start up to the next drift; its delay is "
             "that detection's index less the drift's start (for gradual drifts, the start of the transition). "
             "Every other detection is a false positive (FP); FP per 10,000 values over all values of the row's "
             "streams.", ""]
    by_stream: Dict[tuple, List[dict]] = {}
    for row in rows:
        by_stream.setdefault((row["values"], row["shape"], row["magnitude"]), []).append(row)
    lines += ["| values | drift | magnitude | detector | missed / drifts | median delay | mean delay | FP per 10k | µs per value |",
              "|---|---|---|---|---|---|---|---|---|"]
    for (values, shape, magnitude), group in by_stream.items():
        for row in group:
            size = "-" if shape == "none" else (f"{magnitude:g} σ" if values == "gaussian" else f"+{magnitude:g} error rate")
            lines.append(f"| {values} | {shape} | {size} | {row['detector']} | {row['missed']} / {row['drifts']} | "
                         f"{cell(row['median_delay'])} | {cell(row['mean_delay'])} | {row['false_positives_per_10k']:g} | "
                         f"{row['us_per_value']:g} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> List[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.drift_detectors", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10, help="streams per row (default 10)")
    parser.add_argument("--length-scale", type=float, default=1.0, help="shorter streams for a quick look (0.2)")
    parser.add_argument("--out", help="write the table as Markdown (e.g. docs/drift.md)")
    args = parser.parse_args(argv)
    began = time.strftime("%Y-%m-%d %H:%M:%S")
    rows = evaluate(args.seeds, args.length_scale)
    if args.out:
        command = "python -m benchmarks.drift_detectors" + (f" --seeds {args.seeds}" if args.seeds != 10 else "") + \
                  (f" --length-scale {args.length_scale:g}" if args.length_scale != 1.0 else "") + f" --out {args.out}"
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(markdown(rows, command, began))
        print(f"table written to {args.out}")
    return rows


if __name__ == "__main__":
    main()
