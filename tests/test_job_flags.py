"""A mistyped flag stops a job at once (argparse's usage, exit status 2) instead of training with
the defaults; ``flink run -py`` gives a script exactly the arguments after its path."""

import argparse
import dataclasses
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


def test_every_config_field_has_one_flag_named_by_its_path():
    from pyflink_tensair import TrainConfig
    from pyflink_tensair.cli.settings import settings

    rows = settings()
    assert len({row.flag for row in rows}) == len(rows)
    flagged = {row.path[0] for row in rows}
    python_only = {f.name for f in dataclasses.fields(TrainConfig)} - flagged
    assert python_only == {"name"}, python_only  # the job names its operators
    help_text = _parser().format_help()
    for row in rows:
        assert row.flag in help_text and row.help, row
        assert row.flag == "--" + "-".join(row.path).replace("_", "-")


def test_no_flag_gives_the_jobs_config_and_none_turns_a_sub_config_off(tmp_path):
    from pyflink_tensair import Checkpoints

    config = flags.config_from_args(_parser().parse_args([]), outdir=str(tmp_path))
    expected = flags.JOB_CONFIG.checkpoints
    assert config == dataclasses.replace(flags.JOB_CONFIG, checkpoints=Checkpoints(
        interval_s=expected.interval_s, dir=str(tmp_path / "checkpoints")))
    off = flags.config_from_args(_parser().parse_args(["--checkpoints-interval-s", "none", "--latency-bundle-size", "none"]))
    assert off.checkpoints is None and off.latency is None
    mixed = flags.config_from_args(_parser().parse_args(
        ["--mode", "auto", "--auto-window", "7", "--no-backpressure", "--python-in", "processes",
         "--peer-updates-average-every", "none", "--guards-max-gradient-norm", "3"]), outdir=str(tmp_path))
    assert (mixed.mode.value, mixed.auto.window, mixed.backpressure, mixed.python_in.value) == ("auto", 7, False, "processes")
    assert mixed.peer_updates.average_every is None and mixed.guards.max_gradient_norm == 3.0


def test_a_job_computed_default_yields_to_the_flag():
    config = flags.config_from_args(_parser().parse_args(["--buffer-capacity", "9"]), buffer_capacity=999, name="x")
    assert config.buffer_capacity == 9 and config.name == "x"
    assert flags.config_from_args(_parser().parse_args([]), buffer_capacity=999).buffer_capacity == 999
