"""A mistyped flag stops a job at once (argparse's usage, exit status 2) instead of training with
the defaults; ``flink run -py`` gives a script exactly the arguments after its path."""

import argparse
import os
import subprocess
import sys

import pytest

from pyflink_tensair.cli import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (script, the arguments it needs, the mistyped flag); the probe needs its required flags first,
# or argparse reports those missing instead.
SCRIPTS = [
    ("jobs/quickstart.py", [], ["--replicaz", "2"]),
    ("jobs/word2vec.py", [], ["--checkpoint-interal", "5"]),
    ("jobs/image_classification.py", ["--replicas", "1"], ["--pases", "2"]),
    ("jobs/drift_demo.py", [], ["--evry", "100"]),
    ("benchmarks/throughput/probe_job.py", ["--system", "dasgd", "--workload", "dense", "--batches", "4"],
     ["--replicaz", "2"]),
]


@pytest.mark.parametrize("script,needed,typo", SCRIPTS, ids=[os.path.basename(s) for s, _, _ in SCRIPTS])
def test_a_mistyped_flag_exits_2_naming_it_before_the_job_starts(script, needed, typo, tmp_path):
    pytest.importorskip("pyflink.datastream")  # the jobs import pyflink's client modules
    outdir = tmp_path / "out"
    result = subprocess.run([sys.executable, os.path.join(ROOT, script), *needed, "--outdir", str(outdir), *typo],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"error: unrecognized arguments: {' '.join(typo)}" in result.stderr, result.stderr[-2000:]
    assert result.stderr.startswith("usage: ")
    assert result.stdout == "" and not outdir.exists()  # nothing built, nothing written


def _parser():
    parser = argparse.ArgumentParser(prog="job")
    flags.add_job_arguments(parser, batches=10, batch_size=8)
    return parser


def test_the_strict_parse_takes_what_flink_run_passes_and_nothing_else(capsys):
    # `flink run -py job.py --replicas 2 --staleness-bound none` starts `python -u job.py --replicas
    # 2 --staleness-bound none` (seen by printing sys.argv on a standalone cluster, Flink 2.3):
    # argv is the user's arguments, with nothing of Flink's to let through.
    user = ["--replicas", "2", "--staleness-bound", "none"]
    args = flags.parse_job_arguments(_parser(), user)
    assert args.replicas == 2 and args.staleness_bound is None
    for extra in (["--replicaz", "4"], ["-u"], ["--python", "job.py"], ["job.py"]):
        with pytest.raises(SystemExit) as exit_:
            flags.parse_job_arguments(_parser(), user + extra)
        assert exit_.value.code == 2
        assert f"job: error: unrecognized arguments: {' '.join(extra)}" in capsys.readouterr().err
