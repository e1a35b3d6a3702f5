"""What the replicas do with bad input and poisoned gradients (issue 13): one table, one command.

    python -m benchmarks.bad_input                 # about 2 minutes; --json PATH keeps the figures

Three Flink jobs on a local mini-cluster (the quickstart classifier, 20 features, 4 classes, 2
replicas) and one in-process run of the loop's receiving end:

1. ``clean`` and ``mixed`` (``staleness_bound=0``): the same good records through
   ``to_batches``; ``mixed`` has ``--copies`` of every kind of bad record among them, and as many
   byte strings that are no record at all in its batch stream. Every bad one must come out as a
   dead letter, and the final models must equal ``clean``'s bit for bit.
2. ``batches`` (``staleness_bound=0``, ``Guards(max_batch_bytes=1 MiB)``): good batches with
   ``--copies`` of every kind of bad batch among them, and batches whose features are finite but
   so large that the loss overflows: the replica that trains one skips its own step (a zero in
   its place, for its peer too), and the synchronous replicas must stay identical and finite.
3. ``messages`` (in process, the replica's receiving end as :class:`ReplicaFunction` drives it):
   ``--copies`` poisoned peer messages of every kind between good ones; each must be refused
   and counted, and the replica must finish.
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
import os
import sys
import tempfile
import time
from collections import Counter
from typing import Dict, List

import numpy as np

FEATURES, CLASSES, BATCH = 20, 4, 32
_PARAMS = {"copies": 3}  # set by main() before the jobs are built (shipped by value)


def _good_record(index):
    rng = np.random.default_rng([7, index])
    x = rng.normal(size=FEATURES)
    return x.tolist(), int(np.argmax(x[:CLASSES]))


BAD_RECORDS = {  # kind -> a record of that kind
    "wrong_shape": lambda: ([0.5] * (FEATURES + 1), 1),
    "ragged features": lambda: ([[0.0], [1.0, 2.0]], 0),
    "non_finite features": lambda: ([float("nan")] + [0.0] * (FEATURES - 1), 0),
    "non_finite label": lambda: ([0.0] * FEATURES, float("inf")),
    "missing label": lambda: ([0.0] * FEATURES,),
    "label None": lambda: ([0.0] * FEATURES, None),
    "text instead of a record": lambda: "a line of text",  # (Flink carries no null records)
    "label_out_of_range": lambda: ([0.0] * FEATURES, CLASSES),
    "text features": lambda: (["a"] * FEATURES, 0),
    "text label": lambda: ([0.0] * FEATURES, "cat"),
}


def _spread(good: int, kinds: List[str], copies: int) -> Dict[int, str]:
    """Where ``copies`` inputs of each of ``kinds`` go among ``good`` good ones: evenly, kind after kind."""
    bad = [kind for _ in range(copies) for kind in kinds]
    total = good + len(bad)
    return {int((i + 0.5) * total / len(bad)): kind for i, kind in enumerate(bad)}


def _good_number(index: int, bad: Dict[int, str]) -> int:
    return index - sum(1 for b in bad if b < index)


def _mixed_record(index, *, good: int):
    bad = _spread(good, list(BAD_RECORDS), _PARAMS["copies"])
    if index in bad:
        return BAD_RECORDS[bad[index]]()
    return _good_record(_good_number(index, bad))


def _garbage(index):
    return f"no record {index}".encode()


def _bad_batch(kind: str, index: int) -> bytes:
    from pyflink_tensair.core import wire
    from pyflink_tensair.core.messages import Batch

    x, y = np.zeros((BATCH, FEATURES), np.float32), np.zeros(BATCH, np.int64)
    meta = {"id": 1000 + index}
    batches = {
        "wrong_shape": lambda: Batch(np.zeros((BATCH, FEATURES + 3), np.float32), y, meta),
        "non_finite features": lambda: Batch(np.full((BATCH, FEATURES), np.inf, np.float32), y, meta),
        "non_finite labels": lambda: Batch(x, np.full(BATCH, np.nan), meta),
        "missing labels": lambda: Batch(x, None, meta),
        "empty": lambda: Batch(x[:0], y[:0], meta),
        "oversized (1.4 MB > 1 MiB)": lambda: Batch(np.zeros((16384, FEATURES), np.float32), np.zeros(16384, np.int64), meta),
        "label_out_of_range": lambda: Batch(x, np.full(BATCH, CLASSES + 3), meta),
    }
    return wire.encode_batch(batches[kind]())


BAD_BATCHES = ["wrong_shape", "non_finite features", "non_finite labels", "missing labels", "empty",
               "oversized (1.4 MB > 1 MiB)", "label_out_of_range"]
OVERFLOW = "features finite but near float32's limit (the loss overflows)"


def _batches_stream_item(index, *, good: int):
    """Item ``index`` of the ``batches`` job: good teacher batches, bad ones spread among them."""
    from pyflink_tensair.core import wire
    from pyflink_tensair.core.messages import Batch
    from pyflink_tensair.datasets.teacher import teacher_classification_batch

    bad = _spread(good, BAD_BATCHES + [OVERFLOW], _PARAMS["copies"])
    if index in bad:
        if bad[index] == OVERFLOW:  # finite, but the loss's gradient is not
            batch = teacher_classification_batch(good + index, batch_size=BATCH, features=FEATURES, classes=CLASSES, seed=3)
            return wire.encode_batch(Batch(np.clip(batch.x, -3, 3) * np.float32(1e38), batch.y, {"id": 2000 + index}))
        return _bad_batch(bad[index], index)
    return wire.encode_batch(teacher_classification_batch(_good_number(index, bad), batch_size=BATCH,
                                                          features=FEATURES, classes=CLASSES, seed=3))


def _model():
    from pyflink_tensair.models import zoo

    return zoo.quickstart_classifier(features=FEATURES, classes=CLASSES)


def _run_job(outdir: str, name: str, build_stream, config) -> dict:
    from pyflink.datastream import StreamExecutionEnvironment

    from pyflink_tensair import train
    from pyflink_tensair.core.events import Metrics, decode_final_model
    from pyflink_tensair.core.messages import DeadLetter
    from pyflink_tensair.flink.sinks import write_json_lines, write_records

    env = StreamExecutionEnvironment.get_execution_environment()
    out = train(build_stream(env), model=_model, config=config)
    for stream, prefix in ((out.metrics, "metrics"), (out.dead_letters, "dead-letters")):
        write_json_lines(stream, outdir, prefix, name=config.name)
    write_records(out.models, outdir, "model", name=config.name)
    began = time.time()
    env.execute(name)
    wall = time.time() - began

    def lines(prefix):
        return [line for path in sorted(glob.glob(os.path.join(outdir, f"{prefix}-*.jsonl"))) for line in open(path)]

    metrics = [Metrics.from_json(line) for line in lines("metrics")]
    models = {m.replica: m for m in (decode_final_model(open(p, "rb").read())
                                     for p in glob.glob(os.path.join(outdir, "model-*.bin")))}
    return {"metrics": metrics, "models": models, "wall_s": wall,
            "dead_letters": [DeadLetter.from_json(line) for line in lines("dead-letters")]}


def _finals(run) -> dict:
    finals = [m for m in run["metrics"] if m.phase == "final"]
    counters = ("dead_letters", "messages_rejected", "gradients_clipped", "steps_skipped")
    return {c: sum(getattr(m, c) for m in finals) for c in counters}


def records_jobs(workdir: str, good: int, replicas: int) -> dict:
    """Jobs 1: the same good records, with and without the bad ones."""
    from pyflink.common import Types

    from pyflink_tensair import TrainConfig, to_batches
    from pyflink_tensair.flink import types
    from pyflink_tensair.flink.sources import number_sequence
    from pyflink_tensair.testing import max_weight_diff

    copies = _PARAMS["copies"]

    def stream(mixed):
        def build(env):
            total = good + (copies * len(BAD_RECORDS) if mixed else 0)
            numbers = number_sequence(env, 0, total - 1, name="numbers", uid="numbers")
            maker = functools.partial(_mixed_record, good=good) if mixed else _good_record
            records = (numbers.map(maker, output_type=Types.PICKLED_BYTE_ARRAY()).name("records").uid("records")
                       .set_parallelism(1))  # in order: both runs batch the same records alike
            batches = to_batches(records, batch_size=BATCH, classes=CLASSES, name="records")
            if mixed:
                junk = number_sequence(env, 0, copies - 1, name="junk numbers", uid="junk-numbers")
                batches = batches.union(junk.map(_garbage, output_type=types.bytes_type()).name("junk").uid("junk"))
            return batches
        return build

    runs = {}
    for mixed in (False, True):
        name = "mixed" if mixed else "clean"
        runs[name] = _run_job(os.path.join(workdir, name), name, stream(mixed),
                              TrainConfig(replicas=replicas, staleness_bound=0, name=name))
    clean, mixed = runs["clean"], runs["mixed"]
    expected = Counter(_spread(good, list(BAD_RECORDS), copies).values())
    found = Counter((l.reason, l.what, l.stage) for l in mixed["dead_letters"])
    diff = max(max_weight_diff([clean["models"][r].weights, mixed["models"][r].weights]) for r in range(replicas))
    return {"expected": dict(expected), "found": {" / ".join(k): v for k, v in found.items()},
            "positions": sorted((l.position, l.reason) for l in mixed["dead_letters"] if l.what == "record"),
            "counters": _finals(mixed), "clean_dead_letters": len(clean["dead_letters"]),
            "max_weight_diff_to_clean": diff, "garbage": copies,
            "trained": sum(1 for m in mixed["metrics"] if m.phase == "batch" and m.trained),
            "clean_trained": sum(1 for m in clean["metrics"] if m.phase == "batch" and m.trained),
            "wall_s": [clean["wall_s"], mixed["wall_s"]]}


def batches_job(workdir: str, good: int, replicas: int) -> dict:
    """Job 2: bad batches and overflowing gradients among good batches, synchronous replicas."""

    from pyflink_tensair import Guards, TrainConfig
    from pyflink_tensair.flink import types
    from pyflink_tensair.flink.sources import number_sequence
    from pyflink_tensair.testing import max_weight_diff

    kinds = BAD_BATCHES + [OVERFLOW]
    total = good + _PARAMS["copies"] * len(kinds)

    def build(env):
        numbers = number_sequence(env, 0, total - 1, name="numbers", uid="numbers")
        return numbers.map(functools.partial(_batches_stream_item, good=good),
                           output_type=types.bytes_type()).name("batches").uid("batches")

    run = _run_job(os.path.join(workdir, "batches"), "batches", build,
                   TrainConfig(replicas=replicas, staleness_bound=0, guards=Guards(max_batch_bytes=2 ** 20), name="batches"))
    letters = Counter((l.reason, l.what) for l in run["dead_letters"])
    return {"found": {" / ".join(k): v for k, v in letters.items()}, "counters": _finals(run),
            "max_weight_diff": max_weight_diff([m.weights for m in run["models"].values()]),
            "finite": all(np.isfinite(v).all() for m in run["models"].values() for v in m.weights.values()),
            "trained": sum(1 for m in run["metrics"] if m.phase == "batch" and m.trained), "good": good,
            "wall_s": run["wall_s"]}


def messages_run(copies: int) -> dict:
    """Run 3: poisoned peer messages into a replica's receiving end, as its Flink function
    decodes them (undecodable bytes become a RefusedMessage)."""
    from pyflink_tensair import Guards
    from pyflink_tensair.core import wire
    from pyflink_tensair.core.messages import Batch, DoneMessage, GradientMessage, RefusedMessage, SparseGradient
    from pyflink_tensair.core.replica import Replica
    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    build = functools.partial(zoo.embedding_classifier, vocabulary=100, dim=8, length=4, classes=2)
    sender = KerasModelAdapter(load_model(build, seed=0))
    receiver = Replica(0, KerasModelAdapter(load_model(build, seed=0)), replicas=2, staleness_bound=1,
                       guards=Guards(max_gradient_norm=100.0))

    rng = np.random.default_rng(0)
    batch = Batch(rng.integers(0, 100, size=(16, 4)).astype(np.int32), rng.integers(0, 2, size=16))
    good = sender.compute_gradients(batch).gradients
    sparse_name = next(n for n, g in good.items() if isinstance(g, SparseGradient))
    dense_name = next(n for n, g in good.items() if not isinstance(g, SparseGradient))

    def with_(name, value):
        return {**good, name: value}

    def stale_version(message):
        data = bytearray(wire.encode_message(message))
        data[4] = 2  # the format version byte
        return bytes(data)

    table = good[sparse_name]
    poisons = {
        "non-finite values (NaN)": lambda: with_(dense_name, np.full_like(good[dense_name], np.nan)),
        "non-finite values (inf rows)": lambda: with_(sparse_name, SparseGradient(table.indices, np.full_like(table.values, np.inf), table.dense_shape)),
        "unknown tensor name": lambda: {**good, "999": np.zeros(3, np.float32)},
        "missing tensor": lambda: {k: v for k, v in good.items() if k != dense_name},
        "wrong shape": lambda: with_(dense_name, np.zeros(good[dense_name].shape + (2,), np.float32)),
        "indices outside the table": lambda: with_(sparse_name, SparseGradient(table.indices, table.values, (1000,) + table.dense_shape[1:])),
        "norm above the bound (100)": lambda: {k: (SparseGradient(v.indices, v.values * 1e4, v.dense_shape)
                                                   if isinstance(v, SparseGradient) else v * 1e4) for k, v in good.items()},
        "stale protocol version": "version",
        "bytes that are no message": "junk",
    }
    sent = Counter()
    step = 0
    for _ in range(copies):
        for kind, poison in poisons.items():
            step += 1
            receiver.on_gradient(GradientMessage(1, step, step, good, acks=(0, 0)))  # a good one between
            step += 1
            message = GradientMessage(1, step, step, good if isinstance(poison, str) else poison(), acks=(0, 0))
            data = (stale_version(message) if poison == "version" else b"junk" * 4 if poison == "junk"
                    else wire.encode_message(message))
            try:
                decoded = wire.decode_message(data)
            except Exception as err:  # as ReplicaFunction.process_element2 does
                origin = wire.message_origin(data) or (0, -1, 0, 0)
                decoded = RefusedMessage(origin[1], origin[2], origin[3], origin[0], str(err))
            events = receiver.on_gradient(decoded)
            sent[kind] += 1
            sent[kind, "letters"] += sum(1 for e in events if type(e).__name__ == "DeadLetter")
    receiver.on_input_end()
    receiver.on_gradient(DoneMessage(1, step, (0, 0)))
    return {"sent": {k: sent[k] for k in poisons}, "letters": {k: sent[k, "letters"] for k in poisons},
            "rejected": receiver.messages_rejected, "applied": receiver.messages_applied,
            "good_sent": copies * len(poisons), "finished": receiver.finished,
            "weights_finite": all(np.isfinite(v).all() for v in receiver.model.get_weights().values())}


def report(results: dict) -> str:
    rec, bat, msg = results["records"], results["batches"], results["messages"]
    lines = ["| input | where it is caught | sent | what happened |", "|---|---|---|---|"]
    found = Counter()
    for (position, reason) in rec["positions"]:
        found[reason] += 1
    for kind, count in rec["expected"].items():
        lines.append(f"| record: {kind} | `to_batches` | {count} | dead letter |")
    lines.append(f"| bytes that are no record, in the batch stream | replica | {rec['garbage']} | dead letter "
                 f"(`not_a_record`), no replica's turn taken |")
    for kind in BAD_BATCHES:
        lines.append(f"| batch: {kind} | replica | {results['copies']} | dead letter |")
    lines.append(f"| batch: {OVERFLOW} | replica (the model's step) | {results['copies']} | own step skipped "
                 f"(`steps_skipped`): a zero contribution in its place, here and at the peer |")
    for kind, count in msg["sent"].items():
        lines.append(f"| peer message: {kind} | replica | {count} | refused (`messages_rejected`), "
                     f"dead letter ({msg['letters'][kind]}) |")
    summary = [
        "",
        f"- Records (`clean` and `mixed`, synchronous, {results['replicas']} replicas, {results['good']} good records): "
        f"dead letters {sum(rec['found'].values())} of {sum(rec['expected'].values()) + rec['garbage']} bad inputs "
        f"({', '.join(f'{k}: {v}' for k, v in sorted(rec['found'].items()))}); `clean` {rec['clean_dead_letters']}; "
        f"batches trained {rec['trained']} (clean {rec['clean_trained']}); **final models' max difference to the "
        f"clean run: {rec['max_weight_diff_to_clean']}**.",
        f"- Batches (synchronous): {', '.join(f'{k}: {v}' for k, v in sorted(bat['found'].items()))}; counters "
        f"{bat['counters']}; {bat['trained']} batch steps for {bat['good']} good batches and "
        f"{results['copies']} overflowing ones; replicas' max weight difference {bat['max_weight_diff']}; "
        f"weights finite: {bat['finite']}.",
        f"- Messages: {sum(msg['sent'].values())} poisoned, {msg['good_sent']} good between them: refused "
        f"{msg['rejected']}, applied {msg['applied']}; the replica finished: {msg['finished']}; weights finite: "
        f"{msg['weights_finite']}.",
    ]
    return "\n".join(lines + summary)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=3, help="inputs of each bad kind (default: 3)")
    parser.add_argument("--good", type=int, default=960, help="good records of the records jobs (default: 960)")
    parser.add_argument("--good-batches", type=int, default=60, help="good batches of the batches job (default: 60)")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--json", metavar="PATH", help="write the figures here too")
    args = parser.parse_args(argv)
    _PARAMS["copies"] = args.copies
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import benchmarks/
    with tempfile.TemporaryDirectory(prefix="bad-input-") as workdir:
        results = {"copies": args.copies, "replicas": args.replicas, "good": args.good,
                   "records": records_jobs(workdir, args.good, args.replicas),
                   "batches": batches_job(workdir, args.good_batches, args.replicas),
                   "messages": messages_run(args.copies)}
    print(report(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2, default=str)


if __name__ == "__main__":
    main()
