"""Runs a job (``jobs/*.py``) in a subprocess and reads the summary it writes: the one way the
benchmarks do it.

    summary = run_job(os.path.join(ROOT, "jobs", "quickstart.py"), ["--replicas", "2"], timeout=None,
                      env=client_environment())
    summary["final_loss"]

A job submitted to a cluster (``cluster.submit``) writes its summary where its ``--summary``
says, too: :func:`read_summary` reads it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional, Sequence, Tuple

TAIL_CHARS = 3000  # of the job's stderr (or of its log) in the error of a failed run


def read_summary(path: str) -> dict:
    """The summary a job wrote to ``path`` (its ``--summary``)."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def run_job(script: str, args: Sequence[str], *, timeout: Optional[float], env: Optional[dict] = None,
            cwd: Optional[str] = None, log: Optional[str] = None, watch: Optional[Callable[[int], None]] = None,
            watch_every_s: float = 0.5, python: Optional[str] = None) -> dict:
    """Runs ``[sys.executable, script, *args, "--summary", TMP]`` and returns the summary it wrote.

    ``timeout``: seconds before the job is killed (``None``: no limit); ``env``: its environment
    (``None``: this process's; a local mini-cluster wants ``cluster.client_environment()``);
    ``cwd``: its working folder. Its output is kept in memory, or with ``log`` written to that
    file (stdout and stderr, unbuffered: ``python -u``). ``watch(pid)`` is called as the job
    starts and every ``watch_every_s`` while it runs (e.g. to sample its memory). A non-zero
    exit, a timeout or a missing summary raise ``RuntimeError`` with the command and the last
    ``TAIL_CHARS`` characters of the job's stderr (or of ``log``). ``python``: the interpreter
    (default this one)."""
    with tempfile.TemporaryDirectory(prefix="tensair-job-") as folder:
        summary = os.path.join(folder, "summary.json")
        command = [python or sys.executable, *(["-u"] if log else []), script, *args, "--summary", summary]
        shown = " ".join(command[:-2])  # the temporary summary's path says nothing
        out = open(log, "w", encoding="utf-8") if log else None
        try:
            job = subprocess.Popen(command, stdout=out or subprocess.PIPE,
                                   stderr=subprocess.STDOUT if out else subprocess.PIPE, text=True, env=env, cwd=cwd)
            try:
                stderr, finished = _wait(job, timeout, watch, watch_every_s)
            finally:
                if job.poll() is None:  # interrupted, or the watch failed: the job goes too
                    job.kill()
                    job.communicate()
        finally:
            if out:
                out.close()
        if log:
            with open(log, encoding="utf-8", errors="replace") as f:
                stderr = f.read()
        tail = stderr[-TAIL_CHARS:]
        if not finished:
            raise RuntimeError(f"{shown} did not finish within {timeout:g} s:\n{tail}")
        if job.returncode != 0:
            raise RuntimeError(f"{shown} failed (exit {job.returncode}):\n{tail}")
        if not os.path.exists(summary):
            raise RuntimeError(f"{shown} wrote no summary:\n{tail}")
        return read_summary(summary)


def _wait(job: subprocess.Popen, timeout: Optional[float], watch, every: float) -> Tuple[str, bool]:
    """``(stderr, finished)`` once the job has ended, or has been killed at ``timeout``
    (``finished`` False); stderr is ``""`` when the output goes to a log."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if watch:
            watch(job.pid)
        step = every if watch else None
        if deadline is not None:
            left = max(0.0, deadline - time.monotonic())
            step = left if step is None else min(step, left)
        try:
            _, stderr = job.communicate(timeout=step)
            return stderr or "", True
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                job.kill()
                _, stderr = job.communicate()
                return stderr or "", False
