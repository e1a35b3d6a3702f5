"""Flink's REST API: queries, the running job, savepoints."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Optional

from ..errors import SavepointDeclined, SavepointError, WaitTimeout
from ..waiting import wait_until
from .configuration import rest_url


def rest_get(url: str, timeout: float = 5.0):
    """``GET url``, its JSON answer."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8"))


def rest_post(url: str, body: dict, timeout: float = 5.0):
    """``POST url`` with a JSON body, its JSON answer; Flink's own reason when it refuses."""
    request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as err:  # Flink says why in its body's "errors"
        detail = err.read().decode("utf-8", "replace")
        try:
            detail = "; ".join(str(e).splitlines()[0] for e in json.loads(detail).get("errors", [])) or detail
        except ValueError:
            pass
        raise RuntimeError(f"Flink refused POST {url} (HTTP {err.code}): {detail}") from None


def the_running_job(folder: str) -> str:
    """The one running job's id; an error naming them all if several run."""
    running = [j["jid"] for j in rest_get(f"{rest_url(folder)}/jobs/overview")["jobs"] if j["state"] == "RUNNING"]
    if len(running) != 1:
        raise RuntimeError(f"{len(running)} jobs are running on the cluster in {folder} ({', '.join(running) or 'none'}): "
                           "name one with --job JOBID")
    return running[0]


def job_report(url: str, job_id: str) -> str:
    """What a job is doing, in a few lines: its state, each task's state per subtask, the
    TaskManagers with their free slots and the job's latest exception (for an error message when
    a job makes no progress)."""
    lines = []
    try:
        job = rest_get(f"{url}/jobs/{job_id}")
        lines.append(f"job {job_id}: {job['state']}")
        for vertex in job["vertices"]:
            counts = {state: n for state, n in vertex.get("tasks", {}).items() if n}
            lines.append(f"  {vertex['name'][:70]}: {vertex['status']} {counts}")
        for tm in rest_get(f"{url}/taskmanagers")["taskmanagers"]:
            lines.append(f"  TaskManager {tm['id']}: {tm['freeSlots']} of {tm['slotsNumber']} slots free")
        root = rest_get(f"{url}/jobs/{job_id}/exceptions").get("exceptionHistory", {}).get("entries", [])
        if root:
            lines.append("  latest exception: " + " | ".join(root[0].get("stacktrace", "").splitlines()[:3]))
    except (OSError, ValueError, KeyError) as err:
        lines.append(f"  (REST API of {url} did not answer: {err})")
    return "\n".join(lines)


def running_job(folder: str, timeout: float = 180.0) -> str:
    """The id of a job running on the cluster, once one is (e.g. one submitted by another thread)."""
    url = rest_url(folder)

    def a_running_job() -> Optional[str]:
        running = [j for j in rest_get(f"{url}/jobs/overview")["jobs"] if j["state"] == "RUNNING"]
        return running[0]["jid"] if running else None

    try:
        return wait_until(a_running_job, timeout, interval_s=0.5, what="a running job")
    except WaitTimeout:
        raise RuntimeError(f"no job running on the cluster in {folder} after {timeout:.0f} s") from None


# A savepoint that reaches a task while it finishes (e.g. the one-shot start-markers source) is
# declined ("task is closing", or "tasks not ready" from a task that is not running), refused by
# its TaskManager if the task has just gone, or not triggered while the JobManager sees the task
# between running and finished; the job runs on, and the same savepoint a moment later succeeds.
_TRANSIENT_DECLINES = ("task is closing", "checkpoint request for unknown task", "is not being executed at the moment",
                       "tasks not ready")


def _await_savepoint(url: str, job_id: str, trigger: dict, deadline: float) -> str:
    def location():
        status = rest_get(f"{url}/jobs/{job_id}/savepoints/{trigger['request-id']}")
        if status["status"]["id"] != "COMPLETED":
            return None
        operation = status.get("operation", {})
        if "location" in operation:
            return operation["location"]
        cause = operation.get("failure-cause", {})
        message = (cause.get("stack-trace") or cause.get("class")) if isinstance(cause, dict) else cause  # its first line says why
        line = str(message).splitlines()[0] if message else str(operation)
        error = SavepointDeclined if any(d in str(message) for d in _TRANSIENT_DECLINES) else SavepointError
        raise error(f"the savepoint of job {job_id} failed: {line}")

    try:
        return wait_until(location, max(0.0, deadline - time.time()), interval_s=0.5,
                          what=f"the savepoint of job {job_id}")
    except WaitTimeout:
        raise SavepointError(f"the savepoint of job {job_id} did not complete in time") from None


def _savepoint(url: str, job_id: str, path: str, body: dict, timeout: float) -> str:
    """Triggers a savepoint (``path``: its REST resource) and waits for it, again while a task
    that is finishing declines it and the job still runs."""
    deadline = time.time() + timeout
    while True:
        try:
            return _await_savepoint(url, job_id, rest_post(f"{url}/jobs/{job_id}/{path}", body), deadline)
        except SavepointDeclined:
            if time.time() + 1 >= deadline or rest_get(f"{url}/jobs/{job_id}")["state"] != "RUNNING":
                raise
            time.sleep(1)


def savepoint(folder: str, target_dir: str, job_id: Optional[str] = None, timeout: float = 600.0) -> str:
    """Takes a savepoint of a running job (it keeps running); returns the savepoint's path."""
    url, job_id = rest_url(folder), job_id or the_running_job(folder)
    return _savepoint(url, job_id, "savepoints", {"target-directory": os.path.abspath(target_dir), "cancel-job": False},
                      timeout)


def stop_with_savepoint(folder: str, target_dir: str, job_id: Optional[str] = None, timeout: float = 600.0) -> str:
    """Stops a running job with a savepoint, without draining (no end-of-input: the replicas stop
    where they are instead of finishing, and ``resume`` continues them); returns its path."""
    url, job_id = rest_url(folder), job_id or the_running_job(folder)
    return _savepoint(url, job_id, "stop", {"targetDirectory": os.path.abspath(target_dir), "drain": False}, timeout)
