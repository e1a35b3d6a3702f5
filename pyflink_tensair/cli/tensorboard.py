"""TensorBoard event files for a run: one run per replica plus one for the whole job.

Per replica (``<logdir>/replica-<i>``, step = the replica's local step): ``loss``, ``accuracy``
(both prequential: measured before training on the batch), ``batches_per_s``, ``staleness``,
``held_batches`` and, for paced sources, ``delay_s``. For the job (``<logdir>/job``, step = batches
trained by all replicas): ``window_accuracy`` and ``window_loss`` (sliding-window prequential
means in stream order). For the online loop (``<logdir>/served``, ``<logdir>/frozen``, step =
events scored): ``online_accuracy``, ``online_loss``, ``online_auc`` of ``score()``'s windows.

Example::

    log = TensorBoardLog("runs/tb")
    log.add(new_metrics_records)
    log.add_job_scalars(step=120, window_accuracy=0.93)
    log.close()            # then: tensorboard --logdir runs/tb
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, Optional

_REPLICA_SCALARS = ("loss", "accuracy", "batches_per_s", "staleness", "held_batches", "delay_s")


class TensorBoardLog:
    def __init__(self, logdir: str):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf

        self._tf = tf
        self.logdir = os.path.abspath(logdir)
        self._writers: Dict[str, object] = {}

    def _writer(self, run: str):
        if run not in self._writers:
            self._writers[run] = self._tf.summary.create_file_writer(os.path.join(self.logdir, run))
        return self._writers[run]

    def add(self, records: Iterable) -> None:
        """Writes the per-replica scalars of :class:`~pyflink_tensair.core.events.Metrics` records."""
        for m in records:
            if m.phase != "batch":
                continue
            with self._writer(f"replica-{m.replica}").as_default():
                for name in _REPLICA_SCALARS:
                    value = getattr(m, name)
                    if value is not None:
                        self._tf.summary.scalar(name, float(value), step=m.local_step)

    def add_job_scalars(self, step: int, **scalars: Optional[float]) -> None:
        with self._writer("job").as_default():
            for name, value in scalars.items():
                if value is not None:
                    self._tf.summary.scalar(name, float(value), step=step)

    def add_score_windows(self, reports: Iterable[dict]) -> None:
        """Writes ``score()``'s window reports: run = the report's ``name`` (``served``, ``frozen``),
        step = events scored, scalars ``online_accuracy``, ``online_loss``, ``online_auc``."""
        for report in reports:
            with self._writer(str(report["name"])).as_default():
                for key in ("accuracy", "loss", "auc"):
                    if report.get(key) is not None:
                        self._tf.summary.scalar(f"online_{key}", float(report[key]), step=int(report["scored"]))

    def close(self) -> None:
        for writer in self._writers.values():
            writer.flush()
            writer.close()
