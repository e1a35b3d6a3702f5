"""Drift demo: the image classifier on a stream whose labels are permuted every ``--every`` batches.

TensAIR's demo on Flink, with TensAIR's rule (no staleness bound, no averaging) by default: the
replicas run in ``--modes`` (default ``auto,train``: one job each, on the same stream). In ``auto`` they train until their loss stops falling, then only serve
(predict) while OPTWIN watches the loss; at a drift every replica trains again. Every batch is
predicted in every mode. Printed and written to ``<outdir>/drift_demo.json``: per mode, the share of
batches trained, the prequential accuracy (over the stream and over its last ``--score-window``
batches), the detections and, after each drift, the batches until the accuracy is back to 90% of
its level before the drift; plotted in ``<outdir>/drift_demo.png`` with the drift points and the
detections marked.

    python jobs/drift_demo.py                                   # digits, a drift every 300 batches, 3 drifts
    python jobs/drift_demo.py --modes auto --every 200 --auto-detector page_hinkley
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os

from pyflink_tensair import AutoSettings, Mode, PeerUpdates, batch_source, train
from pyflink_tensair.cli import flags
from pyflink_tensair.cli.progress import LinesFollower
from pyflink_tensair.cli.run import main_guard, run_job
from pyflink_tensair.core.events import Metrics, ModeChange
from pyflink_tensair.core.prequential import in_stream_order, recovery, sliding_mean
from pyflink_tensair.datasets.drifting import PermutedLabels
from pyflink_tensair.datasets.images import parse_image_spec
from pyflink_tensair.errors import ConfigError
from pyflink_tensair.models import zoo


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="digits", type=flags.checked_by(parse_image_spec, keep_text=True),
                        help="digits (default) or cifar10:FOLDER")
    parser.add_argument("--every", type=flags.at_least(1, name="every"), default=300, help="batches between drifts (default 300)")
    parser.add_argument("--drifts", type=flags.at_least(1, name="drifts"), default=3,
                        help="drifts in the stream: it runs for every * (drifts + 1) batches, the data replayed as needed (default 3)")
    parser.add_argument("--modes", default="auto,train", help="comma-separated modes, one job each (default: auto,train)")
    parser.add_argument("--learning-rate", type=flags.greater_than(0, "learning_rate"), default=5e-3, help="Adam learning rate (default 5e-3)")
    # TensAIR's rule by default: with the library's defaults (bound 1, averaging every 8) auto's
    # convergence test, on 20-batch windows of batch-16 losses, stopped training early, at a high
    # loss (docs/use_cases.md, the drift demo); --staleness-bound 1 --peer-updates-average-every 8 to compare
    flags.add_job_arguments(parser, batches=None, batch_size=16, window=20, config=dataclasses.replace(
        flags.JOB_CONFIG, staleness_bound=None, auto=AutoSettings(window=20), peer_updates=PeerUpdates.tensair()))
    args = flags.parse_job_arguments(parser, argv)
    args.modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in args.modes if m not in [mode.value for mode in Mode]]
    if bad or not args.modes:
        raise ConfigError(f"modes must be a comma-separated list of auto, train, serve. Received: --modes {','.join(args.modes)}")
    return args


def analyse(folder: str, points, window: int) -> dict:
    """What one run did, from the files its job wrote."""
    batches = in_stream_order([m for m in LinesFollower(folder, "metrics", Metrics.from_json).poll() if m.phase == "batch"])
    changes = sorted(LinesFollower(folder, "mode-changes", ModeChange.from_json).poll(), key=lambda c: c.time)
    accuracies = [m.accuracy for m in batches if m.accuracy is not None]
    detections = sorted(c.batch_id for c in changes if c.reason == "drift")
    delays = []
    for point, end in zip(points, list(points[1:]) + [len(batches)]):
        found = [d for d in detections if point <= d < end]
        delays.append(found[0] - point if found else None)
    return {"batches": len(batches), "trained_share": round(sum(1 for m in batches if m.trained) / max(1, len(batches)), 4),
            "mean_accuracy": round(sum(accuracies) / max(1, len(accuracies)), 4),
            "final_accuracy": round(sum(accuracies[-window:]) / max(1, len(accuracies[-window:])), 4),
            "recovery": recovery(batches, "accuracy", points=points, window=window, fraction=0.9),
            "detections": detections, "detection_delays": delays,
            "converged_at": sorted(c.batch_id for c in changes if c.reason == "converged"),
            "curve": sliding_mean(batches, "accuracy", window=window)}


def plot(results: dict, points, path: str, window: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for mode, result in results.items():
        xs, ys = zip(*result["curve"]) if result["curve"] else ((), ())
        line, = ax.plot(xs, ys, label=f"{mode} (trained {result['trained_share']:.0%} of batches)", lw=1.2)
        by_batch = dict(result["curve"])
        for key, marker, label in (("detections", "v", "drift detected"), ("converged_at", "o", "converged: serving")):
            marks = [b for b in result[key] if b + 1 in by_batch]
            if marks:
                ax.scatter(marks, [by_batch[b + 1] for b in marks], marker=marker, color=line.get_color(), zorder=5,
                           s=36, label=f"{mode}: {label}")
    for i, point in enumerate(points):
        ax.axvline(point, color="grey", ls="--", lw=0.8, label="labels permuted" if i == 0 else None)
    ax.set_xlabel("batches (stream order)")
    ax.set_ylabel(f"prequential accuracy (last {window} batches)")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    args = parse_args(argv)
    from pyflink.datastream import StreamExecutionEnvironment

    stream = PermutedLabels(args.data, batch_size=args.batch_size, every=args.every, seed=args.seed)
    total = min(args.every * (args.drifts + 1), args.batches or 10 ** 12)
    points = stream.drift_points(total)
    outdir = os.path.abspath(args.outdir or flags.default_outdir("drift_demo"))
    builder = zoo.digits_cnn if stream.input_shape == (8, 8, 1) else zoo.cifar10_cnn
    model = functools.partial(builder, learning_rate=args.learning_rate)
    print(f"drift demo: {args.data}, {total} batches of {args.batch_size}, labels permuted at batches {points}")
    results = {}
    for mode in args.modes:
        args.outdir = os.path.join(outdir, mode)
        env = StreamExecutionEnvironment.get_execution_environment()
        config = dataclasses.replace(flags.config_from_args(args, name=f"drift-{mode}", buffer_capacity=max(256, total)),
                                     mode=mode)
        output = train(batch_source(env, total, stream, rate=args.rate, name=f"drift-{mode}", python_in=config.python_in),
                       model=model, config=config)
        run_job(env, output, args, job_name=f"drift_demo ({mode})", config=config, total_batches=total, model=model,
                extra_summary={"mode": mode, "every": args.every})
        results[mode] = analyse(args.outdir, points, args.score_window)
        shown = {k: v for k, v in results[mode].items() if k != "curve"}
        print(f"{mode}: {json.dumps(shown)}", flush=True)
    plot(results, points, os.path.join(outdir, "drift_demo.png"), args.score_window)
    summary = {"data": args.data, "batches": total, "every": args.every, "drift_points": points,
               "detector": args.auto_detector, "converged_window": args.auto_window,
               "converged_tolerance": args.auto_tolerance,
               "modes": {m: {k: v for k, v in r.items() if k != "curve"} for m, r in results.items()}}
    with open(os.path.join(outdir, "drift_demo.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"plot: {os.path.join(outdir, 'drift_demo.png')}; summary: {os.path.join(outdir, 'drift_demo.json')}")
    return summary


if __name__ == "__main__":
    main_guard(main)
