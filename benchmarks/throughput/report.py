"""Turns benchmark records into ``docs/benchmarks.md`` and PNG plots beside it (``img/``)."""

from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Tuple

from .workloads import NAMES

ORDER = ["dasgd", "bounded", "sync", "flinkml", "flinkml_full", "single", "limit"]
Key = Tuple[str, str, int, str]  # workload, system, replicas, mode


def load(path: str) -> Dict[Key, dict]:
    """The latest record of each (workload, system, replicas, mode); ``limit`` counts for every mode.

    Each record also gets ``_limit``, the rate of the ``limit`` of its workload and replica count
    measured last before it in the file (a run measures its limits before its systems, so that is
    the ceiling of its own run), and ``_run``, the number of the run it belongs to (a new run starts
    where a ``limit`` record follows another system's)."""
    latest: Dict[Key, dict] = {}
    limits: Dict[Tuple[str, int], float] = {}
    run, previous = 0, None
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if r["system"] == "limit":
                    if previous is None or previous != "limit":
                        run += 1
                    if "error" not in r:
                        limits[(r["workload"], r["replicas"])] = r.get("sustainable_rate")
                previous = r["system"]
                r["_run"] = max(run, 1)
                r["_limit"] = limits.get((r["workload"], r["replicas"]))
                latest[(r["workload"], r["system"], r["replicas"], r["mode"])] = r
    return latest


OLD_PLACES = {"thread": "jvm", "process": "processes"}  # records written before TrainConfig.python_in


def python_in(record: dict, of: str = "replicas") -> str:
    """Where a record's training operators (``of="replicas"``) or batch source (``"source"``) ran
    Python, as ``TrainConfig.python_in`` says it; records written before it say
    ``replica_execution``/``source_execution`` (``thread`` or ``process``), and the first ones
    nothing: their Python ran in worker processes.

        >>> python_in({"python_in": "jvm"}), python_in({"replica_execution": "thread"}), python_in({})
        ('jvm', 'jvm', 'processes')
        >>> python_in({"source_execution": "process"}, "source")
        'processes'
    """
    new, old = ("python_in", "replica_execution") if of == "replicas" else ("source_python_in", "source_execution")
    if new in record:
        return record[new]
    value = record.get(old, "process")
    return OLD_PLACES.get(value, value)


def _own_limit(records, workload, system, replicas, mode) -> Optional[float]:
    """The ceiling measured in the same run as the record."""
    r = records.get((workload, system, replicas, mode if system != "limit" else "local"))
    return None if r is None else r.get("_limit")


def _rate(records, workload, system, replicas, mode) -> Optional[float]:
    r = records.get((workload, system, replicas, mode if system != "limit" else "local"))
    return None if r is None or "error" in r else r.get("sustainable_rate")


def _ratio(a, b) -> str:
    return f"{a / b:.2f}" if a and b else "n/a"


def _fmt(x) -> str:
    return "n/a" if x is None else (f"{x:.3g}" if isinstance(x, float) else str(x))


def ratios(records) -> List[str]:
    lines = []
    for workload in NAMES:
        for mode in ("local", "cluster"):
            d1, f1 = _rate(records, workload, "dasgd", 1, mode), _rate(records, workload, "flinkml", 1, mode)
            d2, f2 = _rate(records, workload, "dasgd", 2, mode), _rate(records, workload, "flinkml", 2, mode)
            l1 = _rate(records, workload, "limit", 1, "local")
            if d1 is None and d2 is None:
                continue
            d4, f4 = _rate(records, workload, "dasgd", 4, mode), _rate(records, workload, "flinkml", 4, mode)
            wide = f"; at 4 replicas dasgd / flinkml = {_ratio(d4, f4)}, dasgd 4 / 1 = {_ratio(d4, d1)}" if d4 or f4 else ""
            full2, l2 = _rate(records, workload, "flinkml_full", 2, mode), _rate(records, workload, "limit", 2, "local")
            faithful = f"; dasgd / flinkml_full (whole model) at 2 = {_ratio(d2, full2)}" if full2 else ""
            own1, own2 = _own_limit(records, workload, "dasgd", 1, mode), _own_limit(records, workload, "dasgd", 2, mode)
            lines.append(f"- **{workload}, {mode}**: dasgd / flinkml = {_ratio(d1, f1)} at 1 replica, {_ratio(d2, f2)} at 2; "
                         f"dasgd 2 replicas / 1 replica = {_ratio(d2, d1)}; dasgd 1 replica / limit 1 process = {_ratio(d1, own1 or l1)}; "
                         f"dasgd 2 replicas / limit 2 processes = {_ratio(d2, own2 or l2)}; limit 2 / 1 processes = {_ratio(own2 or l2, own1 or l1)}"
                         + faithful + wide)
    return lines


def _plots(records, folder: str) -> List[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    names = []
    for workload in NAMES:
        present = [k for k in records if k[0] == workload]
        if not present:
            continue
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        for system in ORDER:
            for mode in ("local", "cluster"):
                points = sorted((k[2], _rate(records, workload, system, k[2], mode)) for k in present
                                if k[1] == system and (k[3] == mode or system == "limit"))
                points = [(n, r) for n, r in points if r]
                if points and not (system == "limit" and mode == "cluster"):
                    ax1.plot([n for n, _ in points], [r for _, r in points], marker="o",
                             label=system + ("" if mode == "local" else " (cluster)"),
                             ls="--" if mode == "cluster" else "-")
                if mode == "local":
                    for n in sorted({k[2] for k in present if k[1] == system}):
                        curve = records[(workload, system, n, mode)].get("loss_vs_batches")
                        if curve and n == max(k[2] for k in present if k[3] == "local"):
                            ax2.plot(*zip(*curve), label=f"{system} x{n}")
        ax1.set(xlabel="replicas", ylabel="sustainable mini-batches / s", title=f"{workload}: throughput", yscale="log")
        ax1.legend(fontsize=8)
        ax2.set(xlabel="mini-batches trained (all replicas)", ylabel="training loss",
                title=f"{workload}: loss at the sustainable rate, most replicas")
        ax2.legend(fontsize=8)
        fig.tight_layout()
        name = f"benchmark_{workload}.png"
        fig.savefig(os.path.join(folder, name), dpi=100)
        plt.close(fig)
        names.append(name)
    return names


PEERS = ("The real Flink ML (2.3, `OnlineLogisticRegression`) and River (0.26) against our replicas on one "
         "logistic regression, from records: [ingestion.md](ingestion.md#against-the-real-peers) "
         "(`python -m benchmarks.peers`).")


def write_report(results: str, out: str, command: Optional[str] = None) -> None:
    records = load(results)
    if not records:
        raise ValueError(f"no benchmark records in {results}")
    any_record = next(iter(records.values()))
    m = any_record["machine"]
    dates = sorted(r["date"] for r in records.values())
    lines = ["# Sustainable throughput", "",
             f"Command: `{command or 'python -m benchmarks run'}`  ",
             f"Date: {dates[0]} to {dates[-1]}  ",
             f"Machine: {m['cores']} cores, {m['memory_gib']} GiB, {m['platform']}, Python {m['python']}  ",
             f"TensorFlow: {any_record['tf_intra_op_threads']} intra-op thread per replica (and per baseline operator).  ",
             f"Training operators (every system's): `python_in={python_in(any_record)}` (`TrainConfig.python_in`); "
             f"batches made with `python_in={python_in(any_record, 'source')}` (`batch_source(python_in=...)`).",
             "",
             "Sustainable throughput: the highest arrival rate (mini-batches/s, open-loop source, batch i due at "
             "i / rate) at which the delay between a batch's due time and the end of its training stops growing "
             "(slope under 0.05 s/s after a 30% warm-up, last delays under 2 s, every batch trained); found by "
             "doubling then bisection. `limit`: the same compiled step in N plain Python loops in N processes "
             "at once, measured (the sum of their rates while all run): the machine's own ceiling for N replicas. "
             "`flinkml`: the Flink ML pattern whose updater broadcasts the rows a step changed; `flinkml_full`: "
             "the whole model every step, as Flink ML itself trains. Model busy: the share of wall time each replica (worker) "
             "spent inside its model at the sustainable rate, mean over replicas. Run: the run (one command, or one "
             "workload of it) a row comes from; `/ limit` divides by the ceiling measured in that run, `/ flinkml` "
             "by the latest flinkml row, which may come from another run.", "", "## Ratios", ""] + ratios(records)
    for workload in NAMES:
        rows = sorted((k for k in records if k[0] == workload),
                      key=lambda k: (k[3], k[2], ORDER.index(k[1]) if k[1] in ORDER else 99))
        if not rows:
            continue
        lines += ["", f"## {workload}", "", records[rows[0]].get("description", ""),
                  "| system | replicas | mode | run | sustainable batches/s | / flinkml | / limit (same run) | probes (rate: verdict) | model busy | peak memory MiB (jvm / worker / client) | gradient MB/s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for key in rows:
            r = records[key]
            _, system, replicas, mode = key
            rate = None if "error" in r else r.get("sustainable_rate")
            probes = ", ".join(f"{p['rate']:g}: {'ok' if p['sustainable'] else 'no'}" for p in r.get("probes", []))
            if "error" in r:
                probes = "FAILED: " + " ".join(r["error"].split())[:160].replace("|", "/")
            mem = r.get("peak_memory_mb", {})
            gbs = r.get("gradient_bytes_per_s")
            busy = next((p.get("model_busy_fraction") for p in r.get("probes", []) if p["rate"] == rate), None)
            limit = r.get("_limit") or _rate(records, workload, "limit", replicas, mode)
            lines.append(f"| {system} | {replicas} | {mode} | {r.get('_run', '-')} | {_fmt(rate)} | "
                         f"{_ratio(rate, _rate(records, workload, 'flinkml', replicas, mode))} "
                         f"| {_ratio(rate, limit)} | {probes} | {_fmt(busy)} | "
                         f"{mem.get('jvm', '-')} / {mem.get('python_worker', '-')} / {mem.get('python_client', '-')} | "
                         f"{_fmt(gbs / 1e6) if gbs else '-'} |")
    folder = os.path.join(os.path.dirname(os.path.abspath(out)), "img")
    for name in _plots(records, folder):
        lines += ["", f"![{name}](img/{name})"]
    lines += ["", PEERS]
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
