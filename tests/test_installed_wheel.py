"""What users install: the wheel that ``python -m build`` makes (from its sdist), installed
non-editable into a fresh virtual environment, used from a folder outside the checkout.

An editable install reads the checkout and hides every file the wheel lacks; these tests do not.
The environment is made with ``uv`` (its cache links the pinned packages in seconds instead of
minutes); what it installs is the wheel and the dependencies its metadata declares, nothing else.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "pyflink_tensair"
# Building and installing into an empty cache download the pinned packages (about 1 GB): more
# than the suite's per-test timeout on a new machine; with the cache warm it takes about a minute.
pytestmark = [pytest.mark.wheel, pytest.mark.timeout(1800)]


def _run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, command))} exited {result.returncode}:\n" \
                                   f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result


def _tracked_package_files():
    """The package's files that are not Python source: every one must be in the wheel."""
    if shutil.which("git") and os.path.isdir(os.path.join(ROOT, ".git")):
        listed = _run(["git", "ls-files", PACKAGE], cwd=ROOT).stdout.split()
    else:
        listed = [os.path.relpath(os.path.join(d, f), ROOT) for d, _, files in os.walk(os.path.join(ROOT, PACKAGE))
                  for f in files if "__pycache__" not in d]
    return sorted(p for p in listed if not p.endswith((".py", ".pyc")))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The sdist and the wheel built from it, with the Java channel compiled in (required, not optional)."""
    dist = tmp_path_factory.mktemp("dist")
    env = {**os.environ, "PYFLINK_TENSAIR_REQUIRE_JAR": "1"}
    # --installer uv: the two isolated build environments (sdist, then the wheel from it) from uv's cache
    _run([sys.executable, "-m", "build", "--installer", "uv", "--outdir", str(dist), ROOT], env=env, timeout=900)
    wheels, sdists = glob.glob(str(dist / "*.whl")), glob.glob(str(dist / "*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, os.listdir(dist)
    return wheels[0]


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory):
    """A fresh virtual environment holding the wheel, and a folder outside the checkout to work in."""
    uv = shutil.which("uv") or os.path.join(os.path.dirname(sys.executable), "uv")
    assert os.path.exists(uv), "uv is not installed: tests/run.sh installs it from requirements.txt"
    venv = tmp_path_factory.mktemp("venv")
    _run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], timeout=300)
    python = str(venv / "bin" / "python")
    constraints = os.path.join(ROOT, "requirements.txt")  # the versions the tests pin, so nothing new is resolved
    _run([uv, "pip", "install", "--quiet", "--python", python, "-c", constraints, built], timeout=1200)
    workdir = tmp_path_factory.mktemp("outside")
    # A user's shell, not this test process's environment: earlier tests in this process started a
    # PyFlink gateway, and its variables (PYFLINK_GATEWAY_PORT, FLINK_HOME, ...) would make the
    # child use that gateway and its checkout's classpath instead of the installed wheel's.
    kept = ("HOME", "PATH", "JAVA_HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "TF_CPP_MIN_LOG_LEVEL", "CI")
    env = {k: os.environ[k] for k in kept if k in os.environ}
    env.update(PYFLINK_TENSAIR_CACHE=str(workdir / "cache"), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    where = _run([python, "-c", f"import {PACKAGE}, os; print(os.path.dirname({PACKAGE}.__file__))"],
                 cwd=str(workdir), env=env).stdout.strip()
    assert where.startswith(str(venv)), f"{PACKAGE} was imported from {where}, not from the installed wheel"
    return python, workdir, env


def test_the_wheel_holds_every_file_the_package_tracks_and_the_compiled_channel(built):
    names = set(zipfile.ZipFile(built).namelist())
    missing = [p for p in _tracked_package_files() if p not in names]
    assert not missing, f"the wheel lacks files the package tracks: {missing}"
    jar, manifest = f"{PACKAGE}/jvm/lib/tensair-channel.jar", f"{PACKAGE}/jvm/lib/channel.json"
    assert jar in names and manifest in names, sorted(n for n in names if "/feedback/" in n)
    with zipfile.ZipFile(built) as wheel:
        shipped = json.loads(wheel.read(manifest))
        with wheel.open(jar) as raw, zipfile.ZipFile(raw) as classes:
            compiled = set(classes.namelist())
    from pyflink_tensair.jvm import build, flink_version

    assert shipped["flink_version"] == flink_version() and shipped["sources_digest"] == build.sources_digest()
    for source in build.java_sources():  # every top-level class of every source file is in the jar
        name = os.path.relpath(source, build.SOURCES)[:-len(".java")] + ".class"
        assert name in compiled, f"{name} is not in the shipped jar"
    metadata = [n for n in names if n.endswith(".dist-info/METADATA")][0]
    requires = re.findall(r"^Requires-Dist: (.+)$", zipfile.ZipFile(built).read(metadata).decode(), re.M)
    for extra, needs in {"kafka": "kafka-python", "test": "hypothesis", "jobs": "scikit-learn"}.items():
        assert any(r.startswith(needs) and f'extra == "{extra}"' in r for r in requires), (extra, requires)


CHECKPOINTED_JOB = textwrap.dedent("""
    import glob, os, sys, time
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink_tensair import Checkpoints, TrainConfig, train
    from pyflink_tensair.core.events import Metrics
    from pyflink_tensair.datasets.teacher import teacher_classification_batch
    from pyflink_tensair.flink.sinks import write_json_lines
    from pyflink_tensair.flink.sources import batch_source
    from pyflink_tensair.models import zoo

    BATCHES, FAIL_AT = 40, 10
    work = os.path.abspath(sys.argv[1])
    checkpoints = os.path.join(work, "checkpoints")

    def trained():  # every replica wrote a batch's metrics (whole lines: a file may be mid-write)
        lines = [line for path in glob.glob(os.path.join(work, "out", "metrics-*.jsonl")) for line in open(path)]
        return {Metrics.from_json(line).replica for line in lines
                if line.endswith("\\n") and '"phase":"batch"' in line} == {0, 1}

    def checkpoint_numbers(completed):
        found = glob.glob(os.path.join(checkpoints, "*", "chk-*", "_metadata" if completed else ""))
        return [int(p.rstrip(os.sep).split(os.sep)[-2 if completed else -1][4:]) for p in found]

    def wait(condition, seconds):
        deadline = time.monotonic() + seconds
        while not (done := condition()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return done

    after = []  # the highest checkpoint folder once every replica had trained (None: they never did)

    def make(index):
        # Fails once, at the first batch from FAIL_AT on that is made once both replicas trained and
        # a checkpoint triggered after that completed (Flink makes a checkpoint's folder when it
        # triggers it). It holds a batch until they trained, however long their start takes, and
        # then at most a second at a time: the source's task takes its barrier only between batches.
        if index >= FAIL_AT and not os.path.exists(os.path.join(work, "failed")):
            if not after:
                after.append(max(checkpoint_numbers(False), default=0) if wait(trained, 300) else None)
            if after[0] is not None and wait(lambda: any(n > after[0] for n in checkpoint_numbers(True)), 1.0):
                open(os.path.join(work, "failed"), "w").write(str(index))
                raise RuntimeError(f"injected failure at batch {index}")
        return teacher_classification_batch(index, batch_size=32, features=20, classes=4, seed=0)

    env = StreamExecutionEnvironment.get_execution_environment()
    out = train(batch_source(env, BATCHES, make, rate=20.0, name="wheel"), model=zoo.quickstart_classifier,
                config=TrainConfig(replicas=2, checkpoints=Checkpoints(interval_s=0.5, dir=checkpoints), name="wheel"))
    write_json_lines(out.metrics, os.path.join(work, "out"), "metrics", name="wheel")
    env.execute("checkpointed job from the installed wheel")
    metrics = [Metrics.from_json(line) for path in glob.glob(os.path.join(work, "out", "metrics-*.jsonl"))
               for line in open(path)]
    finals = [m for m in metrics if m.phase == "final"]
    print("restored", sorted({m.replica for m in metrics if m.phase == "restored" and m.local_step > 0}))
    print("trained", sum(m.local_step for m in finals), "of", BATCHES)
""")


def test_the_readme_snippet_runs_from_the_installed_wheel_with_its_shipped_jar(from_the_wheel):
    result, workdir = from_the_wheel
    assert result.returncode == 0, result.stderr[-4000:]
    # 32 batches of a linearly separable 4-class problem: 0.91-0.92 in-process over seeds 0-3
    # (pyflink_tensair.simulate), 0.25 for a model that never applies an update
    assert float(re.search(r"^accuracy (\S+)$", result.stdout, re.M).group(1)) > 0.8, result.stdout
    # the jar came from the wheel: nothing was compiled into the (empty) cache
    assert not glob.glob(str(workdir / "cache" / "*.jar")), os.listdir(workdir / "cache")


@pytest.fixture(scope="module")
def from_the_wheel(installed):
    """The README's snippet as written, then a job that fails once and restores (CHECKPOINTED_JOB),
    in one interpreter of the installed wheel's environment: one start for both."""
    python, workdir, env = installed
    from test_examples import readme_snippet

    script = workdir / "from_the_wheel.py"
    script.write_text(f"{readme_snippet()}\n\n# then a job that fails once and restores\n{CHECKPOINTED_JOB}")
    result = subprocess.run([python, str(script), str(workdir / "job")], capture_output=True, text=True,
                            cwd=str(workdir), env=env, timeout=900)
    return result, workdir


def test_a_job_with_checkpoints_fails_and_restores_from_the_installed_wheel(from_the_wheel):
    """Checkpointed replicas need the wheel's checkpoint and sink classes; a failure makes them restore."""
    result, workdir = from_the_wheel
    assert result.returncode == 0, result.stderr[-4000:]
    assert (workdir / "job" / "failed").exists(), "no checkpoint completed after training, before the last batch: nothing failed"
    assert "restored [0, 1]" in result.stdout, result.stdout  # both, from a step beyond their first
    assert "trained 40 of 40" in result.stdout, result.stdout  # every batch once, across the restore
