"""The model as a vectorized SQL function: ``SELECT id, tensair_predict(f1, f2) FROM events``.

PyFlink's pandas UDFs take a batch of rows as Arrow record batches (pandas Series per column), so
one call of the model's compiled forward pass answers the batch. The function holds the model in
each Python worker and follows a training job's model updates through a folder: the training job
writes ``TrainOutput.updates`` there with ``write_records(out.updates, folder, "update")`` (one file per
update, renamed into place when complete); the function looks for new files at most every
``poll_ms`` and applies them in the order they were written (a
:class:`~pyflink_tensair.core.model_updates.ModelView`: a delta it cannot place waits for the next
snapshot). A worker that starts late begins at the newest snapshot in the folder.

How fresh this path is, is the update interval plus the file's write plus up to ``poll_ms``
(``benchmarks.online_serving --runs udf`` measures it). Serving inside the DataStream job
(:func:`~.serving.serve`), where the updates arrive as a broadcast stream, has no poll.

Example::

    t_env.create_temporary_function("tensair_predict",
                                    predict_function(build, features=2, updates_folder="updates"))
    t_env.sql_query("SELECT id, tensair_predict(f1, f2) AS p FROM events")
"""

from __future__ import annotations

import glob
import json
import os
import time
from typing import List, Optional, Tuple

import numpy as np

from ..errors import ConfigError
from ..validation import require_int

UPDATE_PREFIX = "update"


def update_files(folder: str) -> List[Tuple[int, str]]:
    """``(modification time ns, path)`` of the complete update files in ``folder``, oldest first."""
    found = []
    for path in glob.glob(os.path.join(folder, f"{UPDATE_PREFIX}-*.bin")):
        try:
            found.append((os.stat(path).st_mtime_ns, path))
        except FileNotFoundError:  # replaced between the listing and the stat
            continue
    return sorted(found)


class UpdatesFollower:
    """Applies the updates a folder receives to a view, in the order they were written."""

    def __init__(self, view, folder: str, poll_ms: float):
        self.view, self._folder, self._poll_s = view, folder, poll_ms / 1000.0
        self._last: Optional[Tuple[int, str]] = None
        self._next = 0.0
        self.applied = 0

    def _read(self, path: str):
        from ..core.model_updates import decode_update

        with open(path, "rb") as f:
            return decode_update(f.read())

    def poll(self, now: Optional[float] = None) -> int:
        """Applies what came since the last call (at most every ``poll_ms``); returns how many."""
        now = time.monotonic() if now is None else now
        if now < self._next:
            return 0
        self._next = now + self._poll_s
        files = update_files(self._folder)
        if self._last is None and files:  # a late start: from the newest snapshot on
            for i in range(len(files) - 1, -1, -1):
                if self._read(files[i][1]).snapshot:
                    files = files[i:]
                    break
        elif self._last is not None:
            files = [f for f in files if f > self._last]
        applied = 0
        for entry in files:
            applied += int(self.view.apply(self._read(entry[1])))
            self._last = entry
        self.applied += applied
        return applied


def predict_function(model, *, features: int, updates_folder: Optional[str] = None, poll_ms: float = 100.0,
                     seed: int = 0, freshness_folder: Optional[str] = None):
    """A pandas scalar UDF of ``features`` numeric columns returning the model's output per row as
    ``ARRAY<DOUBLE>``; it follows ``updates_folder`` if given (module docstring), else serves the
    starting model. Its metric group ``tensair`` holds ``model_version`` and ``model_age_ms``.
    With ``freshness_folder``, each worker appends there (``udf-freshness-<pid>.jsonl``) what
    ``serve``'s freshness stream says: per batch that first used an update, each training step's
    freshness and version."""
    from pyflink.table import DataTypes
    from pyflink.table.udf import ScalarFunction, udf

    from ..models.keras_adapter import check_model_argument

    check_model_argument(model)
    require_int("features", features, minimum=1)
    if updates_folder is not None and not os.path.isdir(updates_folder):
        raise ConfigError(f"updates_folder {updates_folder!r} is not a folder (create it before the job writes to it)")
    folder = None if updates_folder is None else os.path.abspath(updates_folder)

    class TensairPredict(ScalarFunction):
        def open(self, function_context):
            from ..core.model_updates import ModelView
            from ..models.keras_adapter import KerasModelAdapter, configure_tensorflow_threads, load_model

            configure_tensorflow_threads(1, None)
            keras_model = load_model(model, seed=seed)
            adapter = KerasModelAdapter(keras_model)
            self._predict = adapter.predict_function()
            self._view = ModelView(adapter)
            self._follower = None if folder is None else UpdatesFollower(self._view, folder, poll_ms)
            group = function_context.get_metric_group().add_group("tensair")
            group.gauge("model_version", lambda: int(self._view.version))
            group.gauge("model_age_ms", lambda: -1 if self._view.time_ms is None
                        else int(time.time() * 1000.0 - self._view.time_ms))

        def eval(self, *columns):
            import pandas as pd

            if self._follower is not None:
                self._follower.poll()
            x = np.stack([np.asarray(c, np.float32) for c in columns], axis=1)
            y = np.asarray(self._predict(x), np.float64).reshape(len(x), -1)
            if freshness_folder is not None:
                self._record_freshness()
            return pd.Series(list(y))

        def _record_freshness(self):
            now_ms = time.time() * 1000.0
            fresh = self._view.served(now_ms)
            if len(fresh):
                with open(os.path.join(freshness_folder, f"udf-freshness-{os.getpid()}.jsonl"), "a") as f:
                    f.write(json.dumps({"version": self._view.version, "served_at_ms": now_ms,
                                        "freshness_ms": [round(float(v), 3) for v in fresh[:, 1]],
                                        "step_versions": [int(v) for v in fresh[:, 0]]}) + "\n")

    return udf(TensairPredict(), input_types=[DataTypes.DOUBLE()] * features,
               result_type=DataTypes.ARRAY(DataTypes.DOUBLE()), func_type="pandas")
