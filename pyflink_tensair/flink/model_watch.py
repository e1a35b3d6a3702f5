"""What the replica function does beside training, with the model replica 0 holds: a probe run
on the Keras model every few seconds (and once at the end), and exports of the model to a folder
(``TrainConfig.exports``). Neither may end the training it observes: a failing probe is reported
in its record, a failed export counted and logged.

Both run between two of the trainer's items, on the thread that owns the model (the function
hands them to the trainer), or once the replica has finished.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Callable, List, Optional

from .types import ProbeRecord


class ModelWatch:
    """Replica ``replica_id``'s probe (``probe``: a function of its Keras model, ``None``: none,
    or not replica 0) and exporter (``exporter``: a :class:`~pyflink_tensair.models.export.ModelExporter`,
    or ``None``)."""

    def __init__(self, replica_id: int, probe: Optional[Callable], probe_every_s: float, exporter):
        self.probe = probe if replica_id == 0 else None
        self.probe_every_s = probe_every_s
        self.exporter = exporter
        self.export_failures = 0
        self.discard_pending = False  # after a rescale: exports of an attempt lost before its first checkpoint
        self._next_probe = time.time() + probe_every_s
        if exporter is not None:
            exporter.check_folder()  # a bad folder fails the job now, not minutes into training

    def probe_due(self) -> bool:
        if self.probe is None or time.time() < self._next_probe:
            return False
        self._next_probe = time.time() + self.probe_every_s
        return True

    def export_due(self) -> bool:
        return self.exporter is not None and self.exporter.due()

    def probe_record(self, replica, phase: str) -> ProbeRecord:
        """The probe's result on ``replica``'s model now (``phase``: ``"progress"`` or ``"final"``)."""
        record = {"replica": replica.id, "phase": phase, "time": time.time(),
                  "local_step": replica.counts.local_step, "model_version": replica.counts.model_version}
        try:
            record["result"] = self.probe(replica.model.model)
        except Exception as err:  # the user's code
            record["error"] = repr(err)
        return ProbeRecord(json.dumps(record, default=float))

    def export(self, replica) -> List:
        """Exports ``replica``'s model (its version and id maps with it); returns no events."""
        if replica.rescaling:  # its model is not the merged one yet
            return []
        if self.discard_pending:
            self.exporter.discard_after(replica.counts.model_version)
            self.discard_pending = False
        try:
            self.exporter.export(replica.model.model, replica.counts.model_version, replica.rows.maps())
        except OSError as err:
            self.export_failures += 1
            print(f"pyflink_tensair: exporting model version {replica.counts.model_version} to "
                  f"{self.exporter.directory!r} failed ({err}); training goes on", file=sys.stderr, flush=True)
        return []

    def restored(self, model_version: int) -> None:
        """The replica resumed at ``model_version``: exports of the lost run, newer than it, go."""
        if self.exporter is not None:
            self.exporter.discard_after(model_version)
