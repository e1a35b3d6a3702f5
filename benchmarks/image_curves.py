"""Prequential accuracy curves of the image classification job: 1 replica; 2 synchronous, default and TensAIR's.

Runs ``jobs/image_classification.py`` (default: digits, its default passes) once per setting on
the same stream, prints a table (accuracy per pass, held-out accuracy, batches per second) and
draws accuracy against batches into a PNG::

    python -m benchmarks.image_curves --plot docs/img/digits_accuracy.png --json benchmarks/results/digits.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

from benchmarks.jobrun import run_job

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = [("1 replica", "1", []), ("2 replicas, staleness 0", "2", ["--staleness-bound", "0"]),
            ("2 replicas, defaults (bound 1, averaging)", "2", []),
            ("2 replicas, TensAIR's rule", "2", ["--staleness-bound", "none", "--peer-updates-average-every", "none"])]


def run_setting(name: str, replicas: str, flags, extra, folder: str) -> dict:
    """The image job's summary with ``flags`` (and ``extra``), its results in ``folder/name``."""
    from pyflink_tensair.cluster import client_environment

    return run_job(os.path.join(ROOT, "jobs", "image_classification.py"),
                   ["--replicas", replicas, *flags, "--outdir", os.path.join(folder, name), *extra],
                   timeout=None, env=client_environment())


def plot(runs, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, summary in runs:
        curve = summary["accuracy_curve"]
        ax.plot([n for n, _ in curve], [v for _, v in curve], label=label)
    per_pass = runs[0][1]["batches_per_pass"]
    for k in range(1, len(runs[0][1]["pass_accuracy"])):
        ax.axvline(k * per_pass, color="grey", lw=0.5, ls=":")
    ax.set_xlabel("batches (stream order)")
    ax.set_ylabel(f"prequential accuracy, last {runs[0][1]['score_window']} batches")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title(f"{runs[0][1]['data']}: batch {runs[0][1]['batch_size']}, {len(runs[0][1]['pass_accuracy'])} passes")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plot", metavar="PNG", help="draw the curves into this file")
    parser.add_argument("--json", metavar="PATH", help="write every run's summary to this file")
    args, extra = parser.parse_known_args(argv)  # the rest goes to the job (e.g. --data, --passes, --seed)
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for i, (label, replicas, flags) in enumerate(SETTINGS):
            summary = run_setting(f"run-{i}", replicas, flags, extra, folder)
            runs.append((label, summary))
            passes = " ".join(f"{a:.3f}" for a in summary["pass_accuracy"])
            print(f"{label:42s} per pass: {passes} | held-out {summary['holdout_accuracy']:.3f} | "
                  f"{summary['batches_per_s']:.1f} batches/s | max staleness {summary['max_staleness']} | "
                  f"replica diff {summary['replica_max_weight_diff']:.3g}", flush=True)
    if args.plot:
        plot(runs, args.plot)
        print(f"curves drawn to {args.plot}")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({label: s for label, s in runs}, f, indent=1)


if __name__ == "__main__":
    main()
