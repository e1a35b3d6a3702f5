"""River's ``LogisticRegression`` on the ingestion benchmark's stream, one ``learn_one`` per
example in one process: the figure a user of River gets. With ``--from-file`` the examples are
read from a file of JSON lines (``json.loads`` per line, timed with the learning). Runs in the side environment
``benchmarks.peers`` builds (River from PyPI); prints one JSON line.

    python benchmarks/peers_river.py --examples 249600
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.ingestion_job import FEATURES, HELDOUT, SEED, linear_examples  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, required=True)
    parser.add_argument("--from-file", help="a file of JSON lines {\"x\": [...], \"y\": label} to read")
    parser.add_argument("--learning-rate", type=float, default=0.05)
    args = parser.parse_args(argv)
    from river import linear_model, optim

    names = [f"f{i}" for i in range(FEATURES)]
    model = linear_model.LogisticRegression(optimizer=optim.SGD(args.learning_rate))
    if args.from_file:
        began = time.perf_counter()
        with open(args.from_file, encoding="utf-8") as lines:
            for line in lines:
                example = json.loads(line)
                model.learn_one(dict(zip(names, example["x"])), bool(example["y"]))
    else:
        x, y = linear_examples(args.examples)
        rows = [dict(zip(names, row)) for row in x.tolist()]  # the dicts a River user's stream holds
        began = time.perf_counter()
        for features, label in zip(rows, y.tolist()):
            model.learn_one(features, bool(label))
    elapsed = time.perf_counter() - began
    test_x, test_y = linear_examples(HELDOUT, seed=SEED + 1)
    right = sum(model.predict_one(dict(zip(names, row))) == bool(label) for row, label in zip(test_x.tolist(), test_y))
    print(json.dumps({"system": "river", "input": "json.loads, learn_one" if args.from_file else "dicts, learn_one", "examples": args.examples, "seconds": elapsed,
                      "heldout_accuracy": right / HELDOUT}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
