"""Does DASGD learn as well as one model and as synchronous SGD? The use-case jobs in Flink, side by side.

Runs a job (``digits``: ``jobs/image_classification.py`` with its defaults; ``quickstart``;
``word2vec``) once per setting and seed on the same stream, and prints one row per setting with
the mean over seeds (and each seed's figure): held-out accuracy (the mean of the replicas' final
models, and the replicas' averaged model), the final prequential loss, word2vec's co-occurrence
similarity (centered cosine of the most co-occurring pairs, and its lead over the same words
shuffled), the largest staleness and batches per second. Settings are ``label=flags`` separated
by ``;`` (flags go to the job); the defaults compare one replica, synchronous SGD, DASGD with the
library's defaults and TensAIR's plain rule::

    python -m benchmarks.learning_quality --job digits --seeds 1,2 --json benchmarks/results/quality-digits.json
    python -m benchmarks.learning_quality --job quickstart --seeds 1,2,3
    python -m benchmarks.learning_quality --job digits --settings "bound 2=--staleness-bound 2;scaled=--peer-updates-scale 0.5"
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import tempfile
from typing import Dict, List, Optional, Tuple

from benchmarks.jobrun import run_job

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = {"digits": "image_classification.py", "quickstart": "quickstart.py", "word2vec": "word2vec.py"}
DEFAULT_SETTINGS = ("1 replica=--replicas 1;sync=--replicas 2 --staleness-bound 0;"
                    "DASGD (defaults)=--replicas 2;"
                    "DASGD (TensAIR: no bound, no averaging)=--replicas 2 --staleness-bound none "
                    "--peer-updates-average-every none")
COLUMNS = (("holdout_accuracy", "held-out acc."), ("holdout_accuracy_averaged", "held-out acc., averaged model"),
           ("final_loss", "final loss"), ("cooccurring_after", "co-occurrence cos."),
           ("cooccurring_gap", "co-occurring - shuffled cos."), ("max_staleness", "max staleness"),
           ("batches_per_s", "batches/s"), ("steps_per_message", "steps per message"))


def parse_settings(text: str) -> List[Tuple[str, List[str]]]:
    """``"label=flags;label=flags"`` as ``[(label, [flag, ...])]``.

    Example::

        >>> parse_settings("one=--replicas 1; sync=--replicas 2 --staleness-bound 0")
        [('one', ['--replicas', '1']), ('sync', ['--replicas', '2', '--staleness-bound', '0'])]
    """
    settings = []
    for item in filter(None, (part.strip() for part in text.split(";"))):
        label, sep, flags = item.partition("=")
        if not sep or not label.strip():
            raise ValueError(f"a setting is 'label=flags'. Received: {item!r}")
        settings.append((label.strip(), shlex.split(flags)))
    return settings


def figures(summary: dict) -> Dict[str, Optional[float]]:
    """The compared figures of one run's summary (``None`` where the job has none)."""
    out = {key: summary.get(key) for key, _ in COLUMNS}
    cosine = summary.get("cosine") or {}
    out["cooccurring_after"] = cosine.get("cooccurring_after")
    if "cooccurring_after" in cosine and "shuffled_after" in cosine:  # the same words paired at random: the baseline
        out["cooccurring_gap"] = cosine["cooccurring_after"] - cosine["shuffled_after"]
    if summary.get("gradient_messages") and summary.get("batches"):  # a replica's broadcast period, on average
        out["steps_per_message"] = summary["batches"] / summary["gradient_messages"]
    if out["holdout_accuracy_averaged"] is None and summary.get("replicas") == 1:
        out["holdout_accuracy_averaged"] = out["holdout_accuracy"]  # one replica is its own average
    return out


def run_once(job: str, flags: List[str], seed: int, folder: str, extra: List[str]) -> dict:
    from pyflink_tensair.cluster import client_environment

    return run_job(os.path.join(ROOT, "jobs", JOBS[job]),
                   [*flags, "--seed", str(seed), "--outdir", os.path.join(folder, "out"),
                    "--checkpoints-interval-s", "none", *extra],
                   timeout=None, env=client_environment(), cwd=ROOT)


def table(rows: List[dict]) -> str:
    """A markdown table: per setting, the mean over seeds of each figure, then each seed's value."""
    shown = [(key, title) for key, title in COLUMNS if any(r["mean"].get(key) is not None for r in rows)]
    lines = ["| setting | " + " | ".join(title for _, title in shown) + " |", "|---" * (len(shown) + 1) + "|"]
    for row in rows:
        cells = []
        for key, _ in shown:
            mean, each = row["mean"].get(key), [s.get(key) for s in row["seeds"]]
            cells.append("-" if mean is None else f"**{mean:.4g}** ({' / '.join('-' if v is None else f'{v:.4g}' for v in each)})")
        lines.append(f"| {row['setting']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(job: str, seeds: List[int], settings: List[Tuple[str, List[str]]], extra: List[str], log=print) -> List[dict]:
    rows = []
    for label, flags in settings:
        per_seed = []
        for seed in seeds:
            with tempfile.TemporaryDirectory(prefix="tensair-quality-") as folder:
                found = figures(run_once(job, flags, seed, folder, extra))
            per_seed.append(found)
            log(json.dumps({"setting": label, "seed": seed, **found}))
        mean = {key: statistics.mean(v) if (v := [s[key] for s in per_seed if s[key] is not None]) else None
                for key, _ in COLUMNS}
        rows.append({"setting": label, "flags": flags, "seeds": per_seed, "mean": mean})
    return rows


def main(argv=None) -> List[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.learning_quality", description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", choices=sorted(JOBS), default="digits")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--settings", default=DEFAULT_SETTINGS, help="'label=job flags' separated by ';'")
    parser.add_argument("--json", metavar="PATH", help="also write the rows to PATH")
    args, extra = parser.parse_known_args(argv)  # the rest goes to every run of the job
    rows = run(args.job, [int(s) for s in args.seeds.split(",")], parse_settings(args.settings), extra)
    print(f"\n{args.job}, seeds {args.seeds} (mean, then each seed):\n")
    print(table(rows))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"job": args.job, "seeds": args.seeds, "extra": extra, "rows": rows}, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
