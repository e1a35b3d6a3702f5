"""The quickstart job with its source at twice the sustainable rate: memory per process over time.

    python -m benchmarks.overload --out docs/img/overload_memory.png     # about 5 minutes

First an unpaced run (``--probe-batches`` batches) measures the rate the job sustains; then the
job runs with its source paced at ``--factor`` (2) times that rate for ``--seconds`` (180), while
the resident memory (VmRSS) of every process of the job is sampled each second. What must hold:
memory stays bounded (the staleness bound caps the loop, the replicas' held-batch buffers are
bounded, Flink's network buffers are, so backpressure reaches the source, which falls behind its
schedule instead of anything buffering without limit), the job finishes by itself, and every
batch is trained once. Nothing is dropped: a full held-batch buffer trains its oldest batch beyond
the bound, counted in ``bound_overflows``. Prints the figures and writes the plot (and, with
``--json``, the samples).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Dict, List

from pyflink_tensair.processes import tree as process_tree

from .jobrun import run_job
from .throughput.memory import _kind, _status

JOB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jobs", "quickstart.py")


def _run(args: List[str], outdir: str, sample_every: float = 0.0):
    """Runs the quickstart job (its output in ``outdir/job.log``); returns its summary and (with
    ``sample_every``) RSS samples ``[(seconds, {pid: (kind, MiB)})]``."""
    samples = []
    began = time.time()

    def sample(job_pid: int) -> None:
        now = {}
        for pid in process_tree([job_pid]):
            status = _status(pid)
            if "VmRSS" in status:
                kind = "python_client" if pid == job_pid else _kind(pid)
                now[pid] = (kind, int(status["VmRSS"].split()[0]) / 1024)
        samples.append((round(time.time() - began, 2), now))

    summary = run_job(JOB, [*args, "--outdir", outdir], timeout=None, log=os.path.join(outdir, "job.log"),
                      watch=sample if sample_every else None, watch_every_s=sample_every or 0.5)
    return summary, samples


def _metrics(outdir: str) -> List[dict]:
    import glob

    return [json.loads(line) for path in sorted(glob.glob(os.path.join(outdir, "metrics-*.jsonl"))) for line in open(path)]


def growth_mb(samples, pid: int, window_s: float) -> float:
    """How much a process's RSS grew over the last ``window_s`` seconds of the run: the mean of
    the last fifth of that window against the mean of its first fifth."""
    points = [(t, s[pid][1]) for t, s in samples if pid in s]
    if not points:
        return 0.0
    end = points[-1][0]
    window = [(t, mb) for t, mb in points if t >= end - window_s]
    fifth = max(1, len(window) // 5)
    first = sum(mb for _, mb in window[:fifth]) / fifth
    last = sum(mb for _, mb in window[-fifth:]) / fifth
    return last - first


def plot(samples, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: Dict[int, list] = {}
    kinds: Dict[int, str] = {}
    for t, sample in samples:
        for pid, (kind, mb) in sample.items():
            series.setdefault(pid, []).append((t, mb))
            kinds[pid] = kind
    fig, ax = plt.subplots(figsize=(8, 4))
    for pid, points in sorted(series.items(), key=lambda item: -max(mb for _, mb in item[1])):
        if max(mb for _, mb in points) < 50:
            continue
        ax.plot([t for t, _ in points], [mb for _, mb in points], label=f"{kinds[pid]} {pid}")
    ax.set_xlabel("seconds since the job was started")
    ax.set_ylabel("resident memory (MiB)")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--probe-batches", type=int, default=1500, help="batches of the unpaced run (default: 1500)")
    parser.add_argument("--factor", type=float, default=2.0, help="the overload: this many times the sustainable rate")
    parser.add_argument("--seconds", type=float, default=180.0, help="how long the source would take on schedule")
    parser.add_argument("--out", metavar="PNG", help="the plot of memory per process over time")
    parser.add_argument("--json", metavar="PATH", help="the figures and samples")
    args = parser.parse_args(argv)
    common = ["--replicas", str(args.replicas), "--checkpoints-interval-s", "10"]
    with tempfile.TemporaryDirectory(prefix="overload-") as workdir:
        os.makedirs(os.path.join(workdir, "probe"))
        probe, _ = _run([*common, "--batches", str(args.probe_batches)], os.path.join(workdir, "probe"))
        sustainable = probe["batches_per_s"]
        rate = args.factor * sustainable
        batches = int(rate * args.seconds)
        print(f"unpaced: {sustainable:.1f} batches/s; overload: {rate:.1f} batches/s for {args.seconds:g} s "
              f"= {batches} batches", flush=True)
        outdir = os.path.join(workdir, "overload")
        os.makedirs(outdir)
        summary, samples = _run([*common, "--batches", str(batches), "--rate", f"{rate:.3f}"], outdir, sample_every=1.0)
        metrics = [m for m in _metrics(outdir) if m["phase"] == "batch"]
    wall = samples[-1][0] if samples else 0.0
    pids = {pid: kind for _, sample in samples for pid, (kind, _) in sample.items()}
    peak = {pid: max(s[pid][1] for _, s in samples if pid in s) for pid in pids}
    window = min(120.0, wall / 2)
    figures = {
        "sustainable_batches_per_s": sustainable, "offered_batches_per_s": rate, "batches": batches,
        "trained": summary.get("batches"), "wall_s": wall, "achieved_batches_per_s": summary.get("batches_per_s"),
        "bound_overflows": summary.get("bound_overflows"), "dead_letters": summary.get("dead_letters"),
        "max_held_batches": max((m["held_batches"] for m in metrics), default=0),
        "max_staleness": max((m["staleness"] for m in metrics), default=0),
        "last_delay_s": max((m["delay_s"] or 0 for m in metrics[-50:]), default=0),
        "finished_replicas": summary.get("finished_replicas"),
        "processes": {str(pid): {"kind": kind, "peak_mb": round(peak[pid], 1),
                                 f"growth_last_{window:.0f}s_mb": round(growth_mb(samples, pid, window), 1)}
                      for pid, kind in pids.items() if peak[pid] >= 50},
    }
    print(json.dumps(figures, indent=2))
    if args.out:
        plot(samples, args.out, f"quickstart, {args.replicas} replicas, source at {args.factor:g}x the sustainable "
                                f"{sustainable:.0f} batches/s ({batches} batches)")
        print(f"plot written to {args.out}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({**figures, "samples": samples}, f)


if __name__ == "__main__":
    main()
