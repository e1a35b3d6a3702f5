"""Writes a data set to a Kafka topic, one example per record (JSON), at a rate.

    python -m pyflink_tensair.cli.produce --bootstrap-servers 127.0.0.1:19092 --topic digits \\
        --data digits --passes 2 --rate 200

``--data``: ``digits`` (the 1,500 training images of scikit-learn's digits; the jobs hold the
other 297 out), ``cifar10:FOLDER`` or ``synthetic`` (as the image job takes them), one JSON record
per image; or ``text:PATH`` (a text file or folder) or ``text:shakespeare`` (the word2vec job's
default corpus), one UTF-8 line per record, for ``jobs/word2vec.py --source kafka``. With ``--rate``
(records per second) a person can watch a job follow a live stream (``--kafka-until never``); the
default writes as fast as the broker takes them. Prints a progress line every few seconds and the
count at the end.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import TensairError
from ..kafka.produce import produce


def text_lines(spec: str, passes: int = 1, limit: int = None):
    """The lines of ``text:PATH`` (or ``text:shakespeare``) as UTF-8 bytes, in corpus order, ``passes``
    times (lines that are not UTF-8 are left out, as the word2vec job's corpus reader does)."""
    from ..datasets.corpus import read_corpus, shakespeare_corpus

    path = spec.split(":", 1)[1]
    path = shakespeare_corpus() if path == "shakespeare" else path
    count = 0
    for _ in range(passes):
        for line in read_corpus(path, []):
            if limit is not None and count >= limit:
                return
            yield line.encode("utf-8")
            count += 1


def examples(data: str, passes: int = 1, seed: int = 0, limit: int = None):
    """``(x, y)`` for every example of ``data``, each pass freshly shuffled (as the image job's stream)."""
    import numpy as np

    from ..datasets.images import ImageStream

    stream = ImageStream(data, batch_size=1, seed=seed)
    count = 0
    for index in range(stream.batches_per_pass * passes):
        if limit is not None and count >= limit:
            return
        batch = stream(index)
        yield batch.x[0], np.asarray(batch.y[0])
        count += 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True, help="HOST:PORT of the broker")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--data", default="digits",
                        help="digits (default), cifar10:FOLDER, synthetic (JSON images) or text:PATH|shakespeare (lines)")
    parser.add_argument("--passes", type=int, default=1, help="times the data set is written (default: 1)")
    parser.add_argument("--records", type=int, default=None, help="stop after this many records")
    parser.add_argument("--rate", type=float, default=0.0, help="records per second (default 0: unpaced)")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of a new topic (default: 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffles (default: 0)")
    args = parser.parse_args(argv)
    if args.passes < 1 or args.rate < 0 or args.partitions < 1 or (args.records is not None and args.records < 1):
        parser.error("--passes, --partitions and --records must be >= 1, --rate >= 0")
    try:
        records = (text_lines(args.data, args.passes, args.records) if args.data.startswith("text:")
                   else examples(args.data, args.passes, args.seed, args.records))
        produce(args.bootstrap_servers, args.topic, records, rate=args.rate, partitions=args.partitions)
    except TensairError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
