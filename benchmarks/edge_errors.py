"""Mistakes at the edges (issue 13): what a user sees for each, in one table.

    python -m benchmarks.edge_errors            # about 2 minutes

Each row runs one mistaken command in a subprocess (a bad flag, a missing data set or model, a
model that does not fit the data, no JDK, ``flink run`` without a cluster) and reports its exit
code, how long it took to fail, and the last line it printed on stderr: a mistake must fail
early, with a message that says what is wrong and how to fix it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from typing import List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _job(name: str, *args: str) -> List[str]:
    return [sys.executable, os.path.join(ROOT, "jobs", name), *args]


def _cases(scratch: str) -> List[Tuple[str, List[str], dict]]:
    no_jdk = os.path.join(scratch, "bin")
    os.makedirs(no_jdk, exist_ok=True)
    if not os.path.exists(os.path.join(no_jdk, "python")):
        os.symlink(sys.executable, os.path.join(no_jdk, "python"))
    without_java = {"PATH": no_jdk, "JAVA_HOME": "", "PYFLINK_TENSAIR_CACHE": os.path.join(scratch, "empty-cache")}
    mlp = os.path.join(scratch, "mlp.keras")
    return [
        ("a configuration value out of range", _job("quickstart.py", "--replicas", "0"), {}),
        ("a staleness bound that is no number", _job("quickstart.py", "--staleness-bound", "soon"), {}),
        ("an unknown bad-input policy", _job("quickstart.py", "--guards-bad-input", "drop"), {}),
        ("a CIFAR-10 folder that does not exist", _job("image_classification.py", "--data", "cifar10:/nonexistent"), {}),
        ("a corpus that does not exist", _job("word2vec.py", "--corpus", "/nonexistent"), {}),
        ("a saved model that does not exist", _job("image_classification.py", "--model", "/nonexistent.keras"), {}),
        ("a saved model of another input shape", _job("image_classification.py", "--model", mlp), {"make_mlp": mlp}),
        ("no JDK on the PATH (the feedback channel must be compiled)",
         [sys.executable, "-c", "from pyflink_tensair.jvm import channel_jar; channel_jar()"], {"env": without_java}),
        ("`flink run` with no cluster started",
         [sys.executable, "-m", "pyflink_tensair.cluster", "submit", "--dir", os.path.join(scratch, "no-cluster"),
          os.path.join(ROOT, "jobs", "quickstart.py")], {}),
    ]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith(("WARNING", "I0000", "E0000"))]
    return lines[-1] if lines else ""


def run_case(command: List[str], extra: dict, timeout: float) -> Tuple[int, float, str]:
    if "make_mlp" in extra:
        subprocess.run([sys.executable, "-c", "from pyflink_tensair.models import zoo; "
                        f"zoo.quickstart_classifier().save({extra['make_mlp']!r})"], check=True, capture_output=True)
    env = {**os.environ, **extra.get("env", {})}
    began = time.time()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return -1, time.time() - began, f"(still running after {timeout:g} s)"
    return done.returncode, time.time() - began, _last_line(done.stderr) or _last_line(done.stdout)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a case counts as hanging")
    args = parser.parse_args(argv)
    print("| mistake | exit code | failed after | what it says (last line on stderr) |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="edge-errors-") as scratch:
        for title, command, extra in _cases(scratch):
            code, seconds, said = run_case(command, extra, args.timeout)
            print(f"| {title} | {code} | {seconds:.1f} s | {said.replace('|', '/')[:400]} |", flush=True)


if __name__ == "__main__":
    main()
