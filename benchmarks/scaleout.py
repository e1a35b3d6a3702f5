"""A scale-out model of DASGD, the bounded variant, sync and the Flink ML pattern, from costs measured here.

This machine has two cores; the model says what the same costs give on more. Each replica (or
Flink ML worker) is assumed to have a core for its trainer and its host work beside it (Java, the
crossings into Python: the trainer thread overlaps them), replicas spread over TaskManagers of
``--cores-per-machine`` cores joined by a ``--gbit`` network. Per replica and local step::

    DASGD      T = max(trainer, host, network)
               trainer = own + (N - 1) * apply             (its fused step, and each peer's apply)
               host    = h_batch + send + (N - 1) * h_message(g)  (a batch in, one message out:
                                                           its encoding and h_send, N - 1 messages in)
               network = (N - 1) * g * per_machine / bandwidth
    bounded s  T_s = max(T, L / s)                          (L: a gradient's trip to a peer and
                                                            the wait behind the step it meets)
    sync       T_0 = grad + L + (N - 1) * (h_message(g) + sum) + apply
    Flink ML   G = grad + L + U(N) + set(M)                 (a global step: nothing overlaps)
               U(N) = N * (h_message(g) + sum) + apply + N * M / bandwidth   (the one updater)

Throughput is ``N / T`` (``N / G``). On a machine of ``C`` cores that also runs the host work,
it is at most ``C / (cpu_per_batch + send + (N - 1) * (apply + h_message(g)))`` (``--cores``
with ``--cpu-per-batch``, the CPU of a batch at one replica, which sends nothing): that is how the
model is checked against the points measured on this machine. The Flink ML pattern saturates
where the updater's ``U(N)`` exceeds the workers' part of the global step.

    python -m benchmarks.scaleout --workload dense --h-batch-ms 9.4 --h-message-ms 0 --h-byte-ns 2.9 --cpu-per-batch-ms 63.9 \
        --measured 1:15,2:24,4:22 --out docs/img/scaleout_dense.png

Costs measured in this process (median of ``--repeats`` steps of the benchmark's workload):
``grad`` (compute_gradients), ``apply`` (apply_gradients), gradient message size ``g`` and its
encode/decode, the whole model ``M`` and ``set`` (set_weights), ``sum`` (one more gradient in
an average). Costs of Flink come from the replica-path profile (``benchmarks.replica_path``):
``h_batch`` and ``h_message`` the host's time per record (the function thread's time outside its
callbacks), ``cpu_per_batch`` all the job's processes' CPU per trained batch at one replica.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Dict, Optional

import numpy as np

SYSTEMS = ("dasgd", "bounded", "sync", "flinkml_full", "flinkml")


@dataclass(frozen=True)
class Costs:
    grad_s: float
    apply_s: float
    sum_s: float
    set_s: float
    grad_bytes: int
    encode_grad_s: float
    decode_grad_s: float
    model_bytes: int
    changed_bytes: Dict[int, int]  # replicas -> bytes of the rows N gradients change (Flink ML's variant)
    encode_model_s: float
    decode_model_s: float
    h_batch_s: float
    h_message_s: float
    h_byte_s: float
    cpu_per_batch_s: Optional[float] = None
    h_send_s: float = 0.0  # the host's time to send one message (the hand-off to Java), once for all its peers
    own_step_s: Optional[float] = None  # the replica's fused step (gradient, own apply, rows out); else grad + apply


def _median_time(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        function()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def measure_costs(workload_name: str, repeats: int, h_batch_s: float, h_message_s: float, h_byte_s: float,
                  cpu_per_batch_s: Optional[float], h_send_s: float = 0.0) -> Costs:
    from benchmarks.throughput import workloads
    from pyflink_tensair.core import wire
    from pyflink_tensair.core.gradients import average_gradients
    from pyflink_tensair.core.messages import GradientMessage, SparseGradient
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, configure_tensorflow_threads, load_model

    configure_tensorflow_threads(1)
    workload = workloads.get(workload_name)
    model = KerasModelAdapter(load_model(workload.model, seed=0))
    batches = [workload.make_batch(i) for i in range(64)]
    for batch in batches[:3]:  # compile
        model.apply_gradients(model.compute_gradients(batch).gradients)
    grads = []
    step_times, apply_times = [], []
    for batch in batches[3:3 + repeats]:
        began = time.perf_counter()
        grads.append(model.compute_gradients(batch).gradients)
        step_times.append(time.perf_counter() - began)
    # applies timed apart from the steps, as a replica applies peers' messages (right after a step,
    # a word2vec apply took 21.5 ms against 9 ms on its own)
    for gradients in grads:
        began = time.perf_counter()
        model.apply_gradients(gradients)
        apply_times.append(time.perf_counter() - began)
    model.train_step(batches[0])  # compile
    own_times = []
    for batch in batches[3 + repeats:3 + 2 * repeats]:  # the fused step a replica with peers takes
        began = time.perf_counter()
        model.train_step(batch)
        own_times.append(time.perf_counter() - began)
    message = GradientMessage(0, 1, 1, grads[0])
    encoded = wire.encode_message(message)
    weights = model.get_weights()
    model_message = wire.encode_message(GradientMessage(0, 1, 1, weights))
    sum_s = _median_time(lambda: average_gradients(grads[:2]), repeats) - _median_time(lambda: average_gradients(grads[:1]), repeats)
    changed = {}
    touched = [model.compute_gradients(b).gradients for b in batches]
    for n in (1, 2, 4, 8, 16, 32, 64):
        size = 0
        for name, value in weights.items():
            sparse = [g[name] for g in touched[:n] if isinstance(g[name], SparseGradient)]
            if sparse:
                rows = len(np.unique(np.concatenate([np.asarray(s.indices) for s in sparse])))
                size += rows * (value.nbytes // value.shape[0] + 8)
            else:
                size += value.nbytes
        changed[n] = size
    return Costs(grad_s=statistics.median(step_times), apply_s=statistics.median(apply_times), sum_s=max(sum_s, 0.0),
                 set_s=_median_time(lambda: model.set_weights(weights), max(3, repeats // 3)),
                 grad_bytes=len(encoded), encode_grad_s=_median_time(lambda: wire.encode_message(message), repeats),
                 decode_grad_s=_median_time(lambda: wire.decode_message(encoded), repeats),
                 model_bytes=len(model_message), changed_bytes=changed,
                 encode_model_s=_median_time(lambda: wire.encode_message(GradientMessage(0, 1, 1, weights)), 3),
                 decode_model_s=_median_time(lambda: wire.decode_message(model_message), 3),
                 h_batch_s=h_batch_s, h_message_s=h_message_s, h_byte_s=h_byte_s, cpu_per_batch_s=cpu_per_batch_s,
                 h_send_s=h_send_s, own_step_s=statistics.median(own_times) if own_times else None)


def _changed(costs: Costs, n: int) -> int:
    known = sorted(costs.changed_bytes)
    return costs.changed_bytes[min((k for k in known if k >= n), default=known[-1])]


def host_time(costs: Costs, nbytes: int) -> float:
    """The host's time to take one record of ``nbytes`` into Python (Java, the crossing)."""
    return costs.h_message_s + nbytes * costs.h_byte_s


def send_time(costs: Costs, n: int) -> float:
    """What a replica's own message costs it (its encoding and ``h_send``), once for all its
    peers; a replica without peers sends nothing."""
    return costs.encode_grad_s + costs.h_send_s if n > 1 else 0.0


def step_times(costs: Costs, system: str, n: int, *, staleness_bound: int = 4, bandwidth: float = 1.25e9,
               per_machine: int = 16, broadcast_every: int = 1) -> Dict[str, float]:
    """Seconds per step of one replica (for Flink ML: per global step, ``n`` batches), and its parts.
    ``broadcast_every`` (DASGD and bounded): local steps summed into one message."""
    g = costs.grad_bytes
    multi = n > per_machine
    k = broadcast_every if system in ("dasgd", "bounded") else 1
    peer_in = host_time(costs, g) + costs.decode_grad_s
    own = costs.own_step_s if costs.own_step_s is not None else costs.grad_s + costs.apply_s
    trainer = own + (n - 1) / k * costs.apply_s
    host = costs.h_batch_s + send_time(costs, n) / k + (n - 1) / k * peer_in
    network = (n - 1) / k * g * per_machine / bandwidth if multi else 0.0  # a machine's replicas hear every peer
    step = max(trainer, host, network)
    latency = costs.encode_grad_s + peer_in + step / 2 + (k - 1) * step  # and half the step it meets
    if system == "dasgd":
        return {"step": step, "trainer": trainer, "host": host, "network": network}
    if system == "bounded":
        return {"step": max(step, latency / staleness_bound), "trainer": trainer, "host": host, "latency": latency}
    if system == "sync":
        return {"step": costs.grad_s + costs.encode_grad_s + (n - 1) * (peer_in + costs.sum_s) + costs.apply_s + network}
    model = costs.model_bytes if system == "flinkml_full" else _changed(costs, n)
    share = model / costs.model_bytes
    updater = (n * (peer_in + costs.sum_s) + costs.apply_s + costs.encode_model_s * share
               + n * model * costs.h_byte_s + (n * model / bandwidth if multi else 0.0))
    workers = costs.grad_s + costs.encode_grad_s + host_time(costs, model) + (costs.decode_model_s + costs.set_s) * share
    return {"step": workers + updater, "workers": workers, "updater": updater}


def throughput(costs: Costs, system: str, n: int, *, cores: Optional[int] = None, **kwargs) -> float:
    """Batches per second of ``n`` replicas. ``cores``: all of them on one machine of that many
    cores, which also runs their host work (``cpu_per_batch``, plus per peer message its apply
    and, at most, its host time; per message sent, its encoding and ``h_send``)."""
    rate = n / step_times(costs, system, n, **kwargs)["step"]
    if cores is not None and costs.cpu_per_batch_s:
        k = kwargs.get("broadcast_every", 1) if system in ("dasgd", "bounded") else 1
        exchanging = system in ("dasgd", "bounded", "sync") and n > 1
        per_peer = costs.apply_s + host_time(costs, costs.grad_bytes) if exchanging else 0.0
        per_send = send_time(costs, n) if exchanging else 0.0
        rate = min(rate, cores / (costs.cpu_per_batch_s + per_send / k + (n - 1) / k * per_peer))
    return rate


def saturation(costs: Costs, system: str, **kwargs) -> Optional[int]:
    """The first replica count at which Flink ML's updater takes longer than its workers."""
    for n in range(1, 257):
        parts = step_times(costs, system, n, **kwargs)
        if parts["updater"] > parts["workers"]:
            return n
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaleout", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=["dense", "sparse"], default="dense")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--h-batch-ms", type=float, required=True, help="host time per batch (replica_path 'outside', no-trainer-thread)")
    parser.add_argument("--h-message-ms", type=float, required=True, help="host time per peer message, less its bytes")
    parser.add_argument("--h-byte-ns", type=float, required=True, help="host time per byte of a record")
    parser.add_argument("--h-send-ms", type=float, default=0.0,
                        help="host time per message sent beyond its encoding, once for all peers (default 0)")
    parser.add_argument("--cpu-per-batch-ms", type=float, help="all processes' CPU per batch at one replica")
    parser.add_argument("--cores", type=int, default=2, help="cores of this machine (for the check against measured points)")
    parser.add_argument("--measured", default="", help="replicas:batches/s pairs measured here for dasgd, e.g. 1:17,2:12")
    parser.add_argument("--gbit", type=float, default=10.0, help="network between machines, Gbit/s")
    parser.add_argument("--cores-per-machine", type=int, default=16)
    parser.add_argument("--staleness-bound", type=int, default=4)
    parser.add_argument("--broadcast-every", type=int, default=8, help="for the extra DASGD row")
    parser.add_argument("--out", help="write a PNG plot here")
    parser.add_argument("--json", help="write the costs and the table here")
    args = parser.parse_args(argv)
    costs = measure_costs(args.workload, args.repeats, args.h_batch_ms / 1000, args.h_message_ms / 1000, args.h_byte_ns / 1e9,
                          None if args.cpu_per_batch_ms is None else args.cpu_per_batch_ms / 1000, args.h_send_ms / 1000)
    options = dict(staleness_bound=args.staleness_bound, bandwidth=args.gbit * 1.25e8, per_machine=args.cores_per_machine)
    shown = {k: (round(v * 1000, 3) if isinstance(v, float) else v) for k, v in asdict(costs).items()}
    shown["h_byte_s"] = f"{costs.h_byte_s * 1e9:g} ns"
    print(f"costs ({args.workload}): " + json.dumps(shown) + "  (times in ms)")
    counts = [1, 2, 4, 8, 16, 32, 64]
    table = {s: [throughput(costs, s, n, **options) for n in counts] for s in SYSTEMS}
    every = args.broadcast_every
    table[f"dasgd, broadcast_every {every}"] = [throughput(costs, "dasgd", n, broadcast_every=every, **options)
                                                for n in counts]
    print("\n| batches/s predicted | " + " | ".join(map(str, counts)) + " |")
    print("|---|" + "---|" * len(counts))
    for system, rates in table.items():
        print(f"| {system} | " + " | ".join(f"{r:.1f}" for r in rates) + " |")
    for system in ("flinkml_full", "flinkml"):
        print(f"{system}: the updater saturates at {saturation(costs, system, **options)} workers")
    measured = {int(a): float(b) for a, b in (p.split(":") for p in args.measured.split(",") if p)}
    checks = {n: (throughput(costs, "dasgd", n, cores=args.cores, **options), rate) for n, rate in measured.items()}
    for n, (predicted, rate) in sorted(checks.items()):
        print(f"check on this machine ({args.cores} cores), dasgd x{n}: predicted {predicted:.1f}, measured {rate:.1f} "
              f"({predicted / rate:.2f}x)")
    if args.out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for system, rates in table.items():
            ax.plot(counts, rates, marker="o", label=system)
        if measured:
            ax.scatter(list(measured), list(measured.values()), color="black", zorder=5,
                       label=f"dasgd measured ({args.cores} cores)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("replicas (one core each)")
        ax.set_ylabel("batches/s")
        ax.set_title(f"{args.workload}: predicted from costs measured on this machine")
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.out, dpi=110)
        print(f"plot written to {args.out}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"costs": asdict(costs), "replicas": counts, "predicted": table,
                       "checks": {str(n): v for n, v in checks.items()}, "options": vars(args)}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
