"""Id tables (issue 28): memory while a stream brings many more ids than rows, learning quality
against a vocabulary known in advance and against the hashing trick, and the table's cost.

    python -m benchmarks.id_tables memory                 # a Zipf click stream with churn, 10x the capacity in ids
    python -m benchmarks.id_tables quality --workload clicks --repeats 3
    python -m benchmarks.id_tables quality --workload words --repeats 3
    python -m benchmarks.id_tables cost --workload words --repeats 3

No Flink: these run the batch makers and one replica (``core.Replica``, the state machine the
Flink operator hosts) in this process, so that the three ways of giving ids rows see the same
stream, the same model and the same memory (rows):

- ``oracle``: a fixed vocabulary built in advance from the whole stream: the ``capacity`` most
  frequent ids get rows, every other id row 0 (what a job with ``--corpus`` does);
- ``table``: :class:`~pyflink_tensair.embeddings.IdTable` (``--min-count``: 5 for words, as
  word2vec.c's, 2 for clicks; the least recently seen id evicted when seen less often), as the
  Flink job runs it;
- ``hashing``: Keras's ``Hashing`` layer into ``capacity + 1`` bins (every id has a row, shared
  with the ids that collide).

Workloads:
- ``clicks``: :class:`~pyflink_tensair.datasets.ZipfClicks` (user and item ids from Zipf laws
  with churn), :func:`~pyflink_tensair.models.zoo.click_model` (Adam); batches of 256; every 10th
  batch is held out: predicted with the model of that moment, not trained on. Figure: the
  held-out AUC over the last 80% of the stream.
- ``words``: Shakespeare's complete works streamed once as lines (chunks of 1,024 lines),
  word2vec (dim 64, batches of 2,048 pairs). Figure: the job's co-occurrence figure (the centered
  mean cosine of the 200 most co-occurring pairs of the whole text, the 100 most frequent words
  left out, minus that of the same words shuffled), on every pair and on the pairs whose words
  the variant gave rows (a word without one counts as cosine 0 in the first).

``memory`` prints, every tenth of the stream, the distinct ids seen so far, the rows in use and
the bytes the table and its sketch hold (users' table), and plots them (``--plot``).
``cost`` times the batch makers (table against oracle, the same lines) and a replica's
``on_batch`` over their batches (the notices and resets) in one run, repeats alternating.
``flink`` runs ``jobs/word2vec.py`` from a Kafka topic of the same lines (a broker started for
the run), vocabulary fixed in advance against grown from the stream, and compares batches/s
and the topic's lines per second of training.

    python -m benchmarks.id_tables flink --capacity 20000 --repeats 3
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import time
from typing import Dict, List

import numpy as np

from pyflink_tensair.core import wire
from pyflink_tensair.core.messages import Batch
from pyflink_tensair.datasets import ZipfClicks
from pyflink_tensair.embeddings import IdColumnBatches, IdTable

VARIANTS = ("oracle", "table", "hashing")


def _figure(values: List[float]) -> dict:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4),
            "runs": [round(v, 4) for v in values]}


# ---------------------------------------------------------------------------------------------- memory

def _traced_bytes() -> int:
    """Bytes allocated by the id table's own code and still held (tracemalloc)."""
    import tracemalloc

    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, "*pyflink_tensair/embeddings/*")])
    return sum(stat.size for stat in snapshot.statistics("filename"))


def memory(args) -> dict:
    import tracemalloc

    tracemalloc.start()
    stream = ZipfClicks(seed=args.seed)
    table = IdTable(args.capacity, min_count=args.min_count)
    seen, rows = set(), []
    step = args.events // 10
    for start in range(0, args.events, args.chunk):
        users, _, _ = stream.events(start, min(args.chunk, args.events - start))
        ids = [str(u) for u in users]
        seen.update(ids)
        table.observe(ids)
        table.take_reassignments()  # as a batch maker does with every batch
        if (start + args.chunk) % step < args.chunk or start + args.chunk >= args.events:
            rows.append({"events": start + len(ids), "distinct_ids": len(seen), "rows_used": len(table),
                         "table_bytes": table.nbytes, "sketch_bytes": table.sketch.nbytes, "traced_bytes": _traced_bytes(),
                         "evicted": table.statistics.evicted})
    tracemalloc.stop()
    print(f"{'events':>9} {'distinct ids':>13} {'rows used':>10} {'table bytes':>12} {'sketch bytes':>13} "
          f"{'traced bytes':>13} {'evicted':>8}")
    for r in rows:
        print(f"{r['events']:>9} {r['distinct_ids']:>13} {r['rows_used']:>10} {r['table_bytes']:>12} "
              f"{r['sketch_bytes']:>13} {r['traced_bytes']:>13} {r['evicted']:>8}")
    final = rows[-1]
    print(f"distinct ids / capacity: {final['distinct_ids'] / args.capacity:.1f}; traced bytes at the end / at a "
          f"tenth of the stream: {final['traced_bytes'] / rows[0]['traced_bytes']:.2f}")
    if args.plot:
        _plot_memory(rows, args.capacity, args.plot)
    return {"capacity": args.capacity, "rows": rows}


def _plot_memory(rows, capacity, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    events = [r["events"] for r in rows]
    fig, left = plt.subplots(figsize=(7, 3.5))
    left.plot(events, [r["distinct_ids"] for r in rows], label="distinct ids seen")
    left.plot(events, [r["rows_used"] for r in rows], label=f"rows used (capacity {capacity:,})")
    left.set_xlabel("events")
    left.set_ylabel("ids")
    right = left.twinx()
    right.plot(events, [r["table_bytes"] / 1e6 for r in rows], "k--", label="table + sketch (MB, estimate)")
    right.plot(events, [r["traced_bytes"] / 1e6 for r in rows], "k:", label="allocated by the table's code (MB, traced)")
    right.set_ylabel("MB")
    right.set_ylim(0, max(r["table_bytes"] for r in rows) / 1e6 * 1.5)
    handles = left.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    left.legend(handles, [h.get_label() for h in handles], loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"plot: {path}")


# ---------------------------------------------------------------------------------------------- makers

class _OracleColumns:
    """Rows of the ``capacity`` most frequent ids of each column over the whole stream (row 0 else)."""

    def __init__(self, columns, capacity, counts: Dict[str, collections.Counter]):
        self.columns = columns
        self.rows = {c: {i: r + 1 for r, (i, _) in enumerate(counts[c].most_common(capacity))} for c in columns}

    def __call__(self, chunk):
        number, records = int(chunk[0]), [line.split(",") for line in chunk[2:]]
        x = {c: np.fromiter((self.rows[c].get(r[k], 0) for r in records), np.int32) for k, c in enumerate(self.columns)}
        y = np.array([float(r[-1]) for r in records], np.float32)[:, None]
        yield wire.encode_batch(Batch(x, y, {"id": number}))


class _HashedColumns:
    """Keras's ``Hashing`` layer into ``capacity + 1`` bins per column."""

    def __init__(self, columns, capacity):
        import keras

        self.columns = columns
        self.hashing = keras.layers.Hashing(num_bins=capacity + 1)

    def __call__(self, chunk):
        number, records = int(chunk[0]), [line.split(",") for line in chunk[2:]]
        x = {c: np.asarray(self.hashing(np.array([r[k] for r in records])), np.int32).reshape(-1)
             for k, c in enumerate(self.columns)}
        y = np.array([float(r[-1]) for r in records], np.float32)[:, None]
        yield wire.encode_batch(Batch(x, y, {"id": number}))


def _click_chunks(args):
    stream = ZipfClicks(seed=args.seed)
    chunks = []
    for n, start in enumerate(range(0, args.events, args.batch_size)):
        users, items, clicks = stream.events(start, min(args.batch_size, args.events - start))
        chunks.append([str(n), str(start), *(f"{u},{i},{c}" for u, i, c in zip(users, items, clicks))])
    return chunks


def _click_makers(args, chunks):
    columns = ("user", "item")
    counts = {c: collections.Counter() for c in columns}
    for chunk in chunks:
        for line in chunk[2:]:
            user, item, _ = line.split(",")
            counts["user"][user] += 1
            counts["item"][item] += 1
    return {"oracle": lambda: _OracleColumns(columns, args.capacity, counts),
            "table": lambda: IdColumnBatches(columns, args.capacity, min_count=args.min_count),
            "hashing": lambda: _HashedColumns(columns, args.capacity)}


def _replica(model):
    from pyflink_tensair.core import Replica

    return Replica(0, model, replicas=1)


def _click_model(args):
    import functools

    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    rows = args.capacity + 1
    return KerasModelAdapter(load_model(functools.partial(zoo.click_model, users=rows, items=rows, dim=16, hidden=32),
                                        seed=args.seed))


def clicks_quality(args, variant, chunks, makers) -> dict:
    from sklearn.metrics import roc_auc_score

    from pyflink_tensair.core.row_resets import batch_notices

    make = makers[variant]()
    replica = _replica(_click_model(args))
    truth, scores = [], []
    warmup = len(chunks) // 5
    for n, chunk in enumerate(chunks):
        for data in make(chunk):
            if wire.peek_kind(data) != wire.KIND_BATCH:
                continue
            batch = wire.decode_batch(data)
            if n % 10 == 9:  # held out: predicted with the model of this moment, not trained on
                replica.apply_row_notices(batch_notices(batch), own=True)
                if n >= warmup:
                    truth.append(batch.y[:, 0])
                    scores.append(replica.model.evaluate(batch).predictions[:, 0])
            else:
                replica.on_batch(batch)
    auc = float(roc_auc_score(np.concatenate(truth), np.concatenate(scores)))
    return {"auc": auc}


# ---------------------------------------------------------------------------------------------- words

def _word_lines(args):
    from pyflink_tensair.datasets.corpus import read_corpus, shakespeare_corpus

    lines = [line for line in read_corpus(args.corpus or shakespeare_corpus(), []) if line.strip()]
    return lines[:args.lines] if args.lines else lines


def _word_makers(args, lines):
    from pyflink_tensair.word2vec import LineChunkBatches, Vocabulary, tokenize
    from pyflink_tensair.word2vec.growing import GrowingVocabulary
    from pyflink_tensair.word2vec.stream import CorpusBatches

    settings = dict(window=3, negatives=4, batch_size=2048, subsample=1e-3, seed=args.seed)

    class _Fixed(CorpusBatches):  # the oracle: the corpus's vocabulary, built in advance from the whole stream
        def __init__(self):
            self.settings, self.vocab_size, self.passes, self._fingerprint = settings, args.capacity, 1, None
            self.vocabulary = Vocabulary.build((w for line in lines for w in tokenize(line)), max_size=args.capacity)

    class _Hashed:
        """Words hashed into capacity + 1 bins; counts per bin for subsampling and negatives."""

        def __init__(self):
            import keras

            from pyflink_tensair.word2vec.lines import chunk_batches

            self.hashing, self.chunk_batches = keras.layers.Hashing(num_bins=args.capacity + 1), chunk_batches
            self.counts = np.zeros(args.capacity + 1, np.int64)

        def __call__(self, chunk):
            words = [tokenize(line) for line in chunk[2:]]
            flat = [w for line in words for w in line]
            if not flat:
                return
            rows = np.asarray(self.hashing(np.array(flat)), np.int32).reshape(-1)
            np.add.at(self.counts, rows, 1)
            encoded, start = [], 0
            for line in words:
                encoded.append(rows[start:start + len(line)])
                start += len(line)
            for batch in self.chunk_batches(int(chunk[0]), [e for e in encoded if e.size], self.counts, settings):
                yield wire.encode_batch(batch)

    return {"oracle": lambda: LineChunkBatches(_Fixed()),
            "table": lambda: GrowingVocabulary(args.capacity, min_count=args.min_count, **settings),
            "hashing": _Hashed}


def _word_chunks(lines, size=1024):
    return [[str(n // size), str(n), *lines[n:n + size]] for n in range(0, len(lines), size)]


def _word2vec_model(args, rows):
    import functools

    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    return KerasModelAdapter(load_model(functools.partial(zoo.word2vec, vocabulary=rows, dim=64, learning_rate=256.0),
                                        seed=args.seed))


def words_quality(args, variant, lines, makers) -> dict:
    from pyflink_tensair.word2vec import Vocabulary, encode_corpus, evaluation, tokenize

    make = makers[variant]()
    rows = args.capacity if variant == "oracle" else args.capacity + 1
    replica = _replica(_word2vec_model(args, rows))
    for chunk in _word_chunks(lines):
        for data in make(chunk):
            if wire.peek_kind(data) == wire.KIND_BATCH:
                replica.on_batch(wire.decode_batch(data))
    table = replica.model.get_weights()["000"]
    # judge on the whole text's vocabulary (frequency ranks), each variant's rows looked up
    judge = Vocabulary.build((w for line in lines for w in tokenize(line)), max_size=args.judge_words)
    pairs = evaluation.cooccurring_pairs(encode_corpus(judge, lines), 3, top=200, skip_most_frequent=100)
    if variant == "oracle":
        held_rows = np.array([make.corpus.vocabulary.index(w) if w in make.corpus.vocabulary else -1 for w in judge.words])
    elif variant == "table":
        mapping = make.table.mapping()
        held_rows = np.array([mapping.get(w, -1) for w in judge.words])
    else:
        held_rows = np.asarray(make.hashing(np.array(judge.words)), np.int64).reshape(-1)
    held = held_rows >= 0
    vectors = table[np.maximum(held_rows, 0)] * held[:, None]
    centered = evaluation.centered(vectors, judge.counts * held)
    shuffled = evaluation.shuffled_pairs(pairs, seed=args.seed)
    both = held[pairs].all(axis=1)
    figure = evaluation.mean_cosine(centered, pairs) - evaluation.mean_cosine(centered, shuffled)
    held_figure = (evaluation.mean_cosine(centered, pairs[both]) - evaluation.mean_cosine(centered, shuffled[held[shuffled].all(axis=1)])
                   if both.sum() >= 2 else float("nan"))
    return {"cooccurrence": float(figure), "cooccurrence_held_pairs": float(held_figure), "pairs_held": int(both.sum()),
            "batches": int(replica.local_step)}


# ---------------------------------------------------------------------------------------------- runs

def quality(args) -> dict:
    results: Dict[str, List[dict]] = {v: [] for v in VARIANTS}
    seed = args.seed
    for repeat in range(args.repeats):  # each repeat another seed: another stream and another start
        args.seed = seed + repeat
        for variant, result in _quality_runs(args):
            results[variant].append(result)
            print(f"repeat {repeat + 1} (seed {args.seed}) {variant:8s} {json.dumps(result)}", flush=True)
    args.seed = seed
    key = "auc" if args.workload == "clicks" else "cooccurrence"
    summary = {v: _figure([r[key] for r in rs]) for v, rs in results.items()}
    print(f"{key}: " + "; ".join(f"{v} {s['median']} [{s['min']}, {s['max']}]" for v, s in summary.items()))
    return {"workload": args.workload, "figure": key, "summary": summary, "runs": results}


def _quality_runs(args):
    if args.workload == "clicks":
        chunks = _click_chunks(args)
        makers = _click_makers(args, chunks)
        distinct = ZipfClicks(seed=args.seed).distinct(args.events)
        print(f"clicks: {args.events:,} events, about {distinct[0]:,} users and {distinct[1]:,} items, "
              f"{args.capacity:,} rows per table", flush=True)
        run = lambda variant: clicks_quality(args, variant, chunks, makers)  # noqa: E731
    else:
        lines = _word_lines(args)
        makers = _word_makers(args, lines)
        print(f"words: {len(lines):,} lines, {args.capacity:,} rows", flush=True)
        run = lambda variant: words_quality(args, variant, lines, makers)  # noqa: E731
    for variant in VARIANTS:
        started = time.time()
        result = run(variant)
        result["seconds"] = round(time.time() - started, 1)
        yield variant, result


def cost(args) -> dict:
    if args.workload == "clicks":
        chunks = _click_chunks(args)
        makers = _click_makers(args, chunks)
        model = lambda: _click_model(args)  # noqa: E731
    else:
        chunks = _word_chunks(_word_lines(args))
        makers = _word_makers(args, [line for chunk in chunks for line in chunk[2:]])
        model = lambda: _word2vec_model(args, args.capacity + 1)  # noqa: E731
    timings: Dict[str, Dict[str, List[float]]] = {v: {"make_ms": [], "on_batch_ms": []} for v in ("oracle", "table")}
    for repeat in range(args.repeats):
        for variant in ("oracle", "table"):
            make, replica = makers[variant](), _replica(model())
            made, make_s, train_s = 0, 0.0, 0.0
            for chunk in chunks:
                started = time.perf_counter()
                batches = [wire.decode_batch(d) for d in make(chunk) if wire.peek_kind(d) == wire.KIND_BATCH]
                make_s += time.perf_counter() - started
                for batch in batches:
                    started = time.perf_counter()
                    replica.on_batch(batch)
                    train_s += time.perf_counter() - started
                made += len(batches)
            timings[variant]["make_ms"].append(1000 * make_s / made)
            timings[variant]["on_batch_ms"].append(1000 * train_s / made)
            print(f"repeat {repeat + 1} {variant:7s} {made} batches: making {1000 * make_s / made:.2f} ms a batch, "
                  f"on_batch {1000 * train_s / made:.2f} ms", flush=True)
    summary = {v: {k: _figure(t) for k, t in ts.items()} for v, ts in timings.items()}
    ratio = [(t_m + t_b) / (o_m + o_b) for t_m, t_b, o_m, o_b in zip(timings["table"]["make_ms"], timings["table"]["on_batch_ms"],
                                                                     timings["oracle"]["make_ms"], timings["oracle"]["on_batch_ms"])]
    summary["table_over_oracle_per_batch"] = _figure(ratio)
    for v in ("oracle", "table"):
        print(f"{v}: making {summary[v]['make_ms']['median']} ms a batch [{summary[v]['make_ms']['min']}, "
              f"{summary[v]['make_ms']['max']}], on_batch {summary[v]['on_batch_ms']['median']} ms "
              f"[{summary[v]['on_batch_ms']['min']}, {summary[v]['on_batch_ms']['max']}]")
    r = summary["table_over_oracle_per_batch"]
    print(f"table / oracle, making + on_batch per batch: {r['median']} [{r['min']}, {r['max']}]")
    return {"workload": args.workload, "summary": summary}


def flink(args) -> dict:
    """The word2vec job from a topic of the same lines, its vocabulary fixed in advance from them
    (``--vocabulary corpus``) or grown from the stream (``stream``): batches/s from the first to
    the last trained batch (the job's ``batches_per_s``), and the topic's lines over that span
    (the stream job makes fewer batches of the same lines: a word's first ``min_count`` - 1
    sightings make no pairs); unpaced, two replicas; runs alternating, the ratio taken per repeat."""
    import os
    import tempfile

    from benchmarks.jobrun import run_job
    from pyflink_tensair.kafka import broker
    from pyflink_tensair.kafka.produce import produce

    job = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jobs", "word2vec.py")
    lines = _word_lines(args)
    folder = tempfile.mkdtemp(prefix="tensair-id-tables-")
    text = os.path.join(folder, "lines.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    servers = broker.start(os.path.join(folder, "kafka"), port=19492)
    try:
        topic = f"id-tables-{int(time.time())}"
        produce(servers, topic, [line.encode("utf-8") for line in lines], progress_every=30)
        common = ["--source", "kafka", "--bootstrap-servers", servers, "--topic", topic, "--vocab-size",
                  str(args.capacity), "--dim", "100", "--replicas", "2", "--lines-per-chunk", "1024"]
        modes = {"oracle": ["--vocabulary", "corpus", "--corpus", text],
                 "table": ["--vocabulary", "stream", "--judge-corpus", text]}
        runs: Dict[str, List[dict]] = {m: [] for m in modes}
        for repeat in range(args.repeats):
            for mode, flags in modes.items():
                outdir = os.path.join(folder, f"{mode}-{repeat}")
                summary = run_job(job, common + flags + ["--outdir", outdir], timeout=None,
                                  log=os.path.join(folder, f"{mode}-{repeat}.log"))
                runs[mode].append({"batches_per_s": summary["batches_per_s"], "batches": summary["batches"],
                                   # the topic's lines over the span from the first to the last trained batch
                                   "lines_per_s": len(lines) * summary["batches_per_s"] / summary["batches"],
                                   "cooccurring_after": summary["cosine"]["cooccurring_after"],
                                   "shuffled_after": summary["cosine"]["shuffled_after"],
                                   "mean_gradient_message_bytes": summary.get("mean_gradient_message_bytes")})
                print(f"repeat {repeat + 1} {mode}: {json.dumps(runs[mode][-1])}", flush=True)
    finally:
        broker.stop(os.path.join(folder, "kafka"))
    summary = {}
    for key in ("batches_per_s", "lines_per_s"):
        summary[key] = {m: _figure([r[key] for r in rs]) for m, rs in runs.items()}
        summary[key]["table_over_oracle"] = _figure([t[key] / o[key] for t, o in zip(runs["table"], runs["oracle"])])
        print(f"{key}: " + "; ".join(f"{m} {s['median']} [{s['min']}, {s['max']}]" for m, s in summary[key].items()))
    return {"lines": len(lines), "capacity": args.capacity, "summary": summary, "runs": runs}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["memory", "quality", "cost", "flink"])
    parser.add_argument("--workload", choices=["clicks", "words"], default="clicks")
    parser.add_argument("--capacity", type=int, help="rows per id table (default: memory 1,500; clicks 2,000; words 5,000)")
    parser.add_argument("--events", type=int, default=None, help="click events (default: memory 500,000; else 200,000)")
    parser.add_argument("--min-count", type=int, default=None, help="table: sightings before an id gets a row "
                        "(default: words 5, as word2vec.c; clicks 2)")
    parser.add_argument("--chunk", type=int, default=4096, help="memory: ids observed together")
    parser.add_argument("--batch-size", type=int, default=256, help="clicks: events a batch")
    parser.add_argument("--corpus", help="words: the text streamed (default: Shakespeare)")
    parser.add_argument("--lines", type=int, default=None, help="words: the first this many lines only")
    parser.add_argument("--judge-words", type=int, default=50_000, help="words: the judging vocabulary's size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", help="memory: write the plot here (PNG)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    if args.capacity is None:
        args.capacity = 1500 if args.what == "memory" else 5000 if args.workload == "words" else 2000
    if args.min_count is None:
        args.min_count = 5 if args.workload == "words" else 2
    if args.events is None:
        args.events = 500_000 if args.what == "memory" else 200_000
    result = {"memory": memory, "quality": quality, "cost": cost, "flink": flink}[args.what](args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
