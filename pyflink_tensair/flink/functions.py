"""The PyFlink functions of the training graph. They translate callbacks; the replica decides.

``ReplicaFunction`` hosts one :class:`~pyflink_tensair.core.replica.Replica` per subtask. Routing
batches and fanning messages out to the replicas happen on the JVM (:mod:`.routing`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from pyflink.datastream import KeyedCoProcessFunction, RuntimeContext

from ..config import PythonIn, TrainConfig
from ..core import wire
from ..core.events import Broadcast, FinalModel, Metrics, ModeChange, Prediction
from ..core.messages import DeadLetter, RefusedMessage, preview
from ..core.replica import Replica
from ..core.trainer import InlineTrainer, TrainerThread
from ..errors import ProtocolError, WireFormatError
from ..core.updates import ModelUpdate, encode_update
from . import types
from .checkpointing import ChunkedState, ValueStates
from .replica_metrics import ReplicaMetrics

END_OF_TIME = 2 ** 63 - 1  # Long.MAX_VALUE: the watermark a bounded input sends when it ends
CREDIT_REPEAT_S = 0.05  # well within the credit gate's quiet time (flink.loop.CREDIT_QUIET_MS)


def subtask_index(runtime_context) -> int:
    """``runtime_context.get_index_of_this_subtask()``, also in thread mode: PyFlink 2.3's embedded
    context calls the Java ``getIndexOfThisSubtask()``, which Flink 2.0 moved to ``getTaskInfo()``."""
    try:
        return runtime_context.get_index_of_this_subtask()
    except AttributeError:  # 'pemja.PyJObject' object has no attribute 'getIndexOfThisSubtask'
        return int(runtime_context._runtime_context.getTaskInfo().getIndexOfThisSubtask())


def _published(replica: Replica) -> list:
    out: list = []
    replica.publish(out)
    return out


@dataclass(frozen=True)
class _ProbeRecord:
    text: str  # JSON


class ReplicaFunction(KeyedCoProcessFunction):
    """Input 1: an encoded batch or start marker; input 2: a peer's encoded message; both keyed by
    the replica's pinned key (checked).

    Main output: prediction rows. Side outputs: metrics (JSON), feedback (encoded messages for
    the channel), models (each replica's final weights), probes (JSON; replica 0 runs ``probe``
    on its Keras model every ``probe_every_s`` seconds and once at the end), mode changes and
    dead letters (JSON), credit (``"<replica>:<0|1>"`` when the replica's saturation changes,
    with ``TrainConfig.backpressure``).

    Hosted by :class:`~.checkpointing` 's replica operator, input 1 also brings an open marker
    (restore the replica's state, if a checkpoint holds one, and re-send what peers may lack)
    and a snapshot marker before every checkpoint barrier (let the trainer finish, emit, write
    the state).
    """

    def __init__(self, model, config: TrainConfig, keys: List[int],
                 probe: Optional[Callable] = None, probe_every_s: float = 5.0):
        self._model = model
        self._config = config
        self._keys = keys
        self._probe = probe
        self._probe_every_s = probe_every_s
        self._replica = None

    def open(self, runtime_context: RuntimeContext):
        from ..models.export import ModelExporter
        from ..models.keras_adapter import (KerasModelAdapter, configure_tensorflow_threads, load_model,
                                            shared_inter_op_threads)

        cfg = self._config
        index = subtask_index(runtime_context)
        # in thread mode the replicas of a TaskManager share one TensorFlow (one sparse replica on
        # two cores with two threads: as fast as Keras's train_on_batch)
        configure_tensorflow_threads(cfg.tf_intra_op_threads, shared_inter_op_threads(cfg.replicas)
                                     if cfg.python_in is PythonIn.JVM else None)
        model = KerasModelAdapter(load_model(self._model, seed=cfg.seed), sparse_values=cfg.sparse_values)
        self._replica = Replica(index, model, cfg)
        self._trainer = (TrainerThread(self._replica) if cfg.trainer_thread
                         else InlineTrainer(self._replica))
        self._metrics_tag = types.metrics_tag(cfg.name)
        self._feedback_tag = types.feedback_tag(cfg.name)
        self._models_tag = types.models_tag(cfg.name)
        self._probes_tag = types.probes_tag(cfg.name)
        self._mode_changes_tag = types.mode_changes_tag(cfg.name)
        self._dead_letters_tag = types.dead_letters_tag(cfg.name)
        self._updates_tag = types.updates_tag(cfg.name)
        self._inputs = 0  # records on input 1: the position of bytes that carry no batch id
        # what the credit gate last heard from this replica (it starts a new attempt unsaturated)
        self._credit_tag = types.credit_tag(cfg.name) if cfg.backpressure else None
        self._reported_saturated = False
        self._reported_applied = self._reported_at = 0
        self._next_probe = time.time() + self._probe_every_s
        self._exporter = (ModelExporter(cfg.exports.dir, cfg.exports.every_s)
                          if cfg.exports is not None and index == 0 else None)
        self._export_failures = 0
        if self._exporter is not None:
            self._exporter.check_folder()  # a bad folder fails the job now, not minutes into training
        self._timer_registered = False
        self._flush_timer: Optional[int] = None
        self._input_ended = False
        self._callback_s = 0.0
        self._codec_s = 0.0
        self._last: Metrics = None
        self._state = ChunkedState(ValueStates(runtime_context))
        self._adopted: Dict[int, dict] = {}  # after a rescale: old replica id -> its state (until open)
        self._discard_exports = False
        self._snapshot_bytes = self._snapshot_written = self._snapshot_ms = 0
        self._metrics = self._register_metrics(runtime_context.get_metrics_group().add_group("tensair"))

    def close(self):
        if getattr(self, "_trainer", None) is not None:
            self._trainer.close()
        if getattr(self, "_metrics", None) is not None:
            self._metrics.publish(force=True)  # the final values, while the task's metric group is open

    def _register_metrics(self, group) -> ReplicaMetrics:
        """The replica's metrics (group ``tensair``): gauges in process mode; in thread mode Java
        gauges that the task thread sets (:meth:`_flush`, :meth:`close`), since a Python gauge read
        by Flink's metric thread as the task ends crashed the TaskManager (see :mod:`.replica_metrics`).
        Integers only: fractional values are scaled (loss_x1e6 = loss * 1e6)."""
        def last(read, scale=1):
            return lambda: int(round((read(self._last) or 0) * scale)) if self._last else 0

        def replica(read, none=0):
            return lambda: read(self._replica) if self._replica is not None else none

        # this replica's last own drift: the batch that showed it, when (epoch ms), and the
        # detector's test statistic against its threshold (-1 / 0 before the first drift)
        def drift(read, scale, none):
            def value():
                replica = self._replica
                found = read(replica) if replica is not None and replica.last_drift is not None else None
                return none if found is None or found != found else int(round(found * scale))
            return value

        read = {
            "loss_x1e6": last(lambda m: m.loss, 1e6),
            "accuracy_x1e6": last(lambda m: m.accuracy, 1e6),
            "model_version": last(lambda m: m.model_version),
            "local_step": last(lambda m: m.local_step),
            "staleness": last(lambda m: m.staleness),
            "batches_per_s_x1000": last(lambda m: m.batches_per_s, 1e3),
            "held_batches": last(lambda m: m.held_batches),
            # the last snapshot (checkpoint) of this replica: its size, and the bytes that changed
            "snapshot_bytes": lambda: self._snapshot_bytes,
            "snapshot_written_bytes": lambda: self._snapshot_written,
            # in Python: the trainer drained and the state handed to PyFlink; the operator's own
            # checkpoint_pause_ms adds the commit of those writes to Flink's state
            "snapshot_ms": lambda: self._snapshot_ms,
            "export_failures": lambda: self._export_failures,
            "unacked_messages": replica(lambda r: r.unacked_messages),
            # Mode.AUTO: 1 while training; drifts this replica's detector found; batches predicted only
            "training": replica(lambda r: int(r.training)),
            "drifts_detected": replica(lambda r: r.policy.drifts if r.policy else 0),
            "batches_served": replica(lambda r: r.batches_served),
            "last_drift_batch": drift(lambda r: r.last_drift.batch_id, 1, -1),
            "last_drift_time_ms": drift(lambda r: r.last_drift.time, 1e3, -1),
            "last_drift_statistic_x1e6": drift(lambda r: r.policy.last_drift.test_statistic()[0], 1e6, 0),
            "last_drift_threshold_x1e6": drift(lambda r: r.policy.last_drift.test_statistic()[1], 1e6, 0),
        }
        # Guards: input set aside, peer messages refused, peer gradients clipped, own steps skipped
        for counter in ("dead_letters", "messages_rejected", "gradients_clipped", "steps_skipped"):
            read[counter] = replica(functools.partial(lambda name, r: getattr(r, name, 0), counter))
        return ReplicaMetrics(group, read)

    @staticmethod
    def _current_key(ctx):
        key = ctx.get_current_key()
        return key[0] if isinstance(key, (tuple, list)) else key  # Row(key) on the JVM

    def _own_key(self, ctx) -> bool:
        return self._current_key(ctx) == self._keys[self._replica.id]

    def _check_key(self, ctx) -> None:
        if not self._own_key(ctx):
            key = self._current_key(ctx)
            raise ProtocolError(
                f"subtask {self._replica.id} received key {key}, expected {self._keys[self._replica.id]}: "
                "replica pinning is broken (was the operator's max parallelism changed?)")
        if not self._timer_registered:
            ctx.timer_service().register_event_time_timer(END_OF_TIME)
            self._timer_registered = True

    def process_element1(self, value, ctx):
        began = time.perf_counter()
        try:
            kind, error = wire.peek_kind(value), None
        except WireFormatError as err:
            kind, error = None, err
        if kind == wire.KIND_ADOPT:  # under an old replica's key: not this subtask's own
            self._adopt(value, ctx)
            return
        self._check_key(ctx)
        self._inputs += 1
        batch = None
        if kind == wire.KIND_BATCH:
            try:
                batch = wire.decode_batch(value)
            except WireFormatError as err:
                kind, error = None, err
        if error is not None:  # bytes that are no batch: set aside (or, by policy, fail the job)
            letter = DeadLetter("not_a_record", str(error), "batch", "replica", -self._inputs, preview(wire.as_bytes(value)))
            self._trainer.call(lambda replica: replica.set_aside(letter))
        if kind == wire.KIND_OPEN:
            old_replicas = wire.rescale_of(value)[1]
            yield from (self._rescale(old_replicas) if old_replicas else self._restore())
        elif kind == wire.KIND_SNAPSHOT:
            yield from self._snapshot()
        elif kind == wire.KIND_DEAD_LETTER:  # set aside on its way here (to_batches)
            letter = wire.decode_dead_letter(value)
            self._trainer.call(lambda replica: replica.set_aside(letter))
        elif batch is not None:
            self._codec_s += time.perf_counter() - began
            self._trainer.put_batch(batch)
            if self._probe is not None and self._replica.id == 0 and time.time() >= self._next_probe:
                self._trainer.call(lambda replica: [_ProbeRecord(self._probe_record("progress"))])
                self._next_probe = time.time() + self._probe_every_s
            if self._exporter is not None and self._exporter.due():
                self._trainer.call(self._export)  # between two steps, on the thread that owns the model
        yield from self._flush(ctx, began)

    def process_element2(self, value, ctx):
        began = time.perf_counter()
        self._check_key(ctx)
        try:
            message = wire.decode_message(value)
        except WireFormatError as err:  # counted against its sender, as far as its header tells
            origin = wire.message_origin(wire.as_bytes(value)) or (0, -1, 0, 0)
            message = RefusedMessage(origin[1], origin[2], origin[3], origin[0], str(err))
        self._codec_s += time.perf_counter() - began
        self._trainer.put_message(message)
        yield from self._flush(ctx, began)

    def on_timer(self, timestamp, ctx):
        began = time.perf_counter()
        if not self._own_key(ctx):  # an old replica's timer, restored after a rescale: its key serves no replica
            return
        if timestamp == END_OF_TIME:
            if not self._input_ended:
                self._input_ended = True
                self._trainer.put_end()
        elif timestamp == self._flush_timer:
            self._flush_timer = None
            if self._replica.update_due_in_s() == 0.0:
                self._trainer.call(lambda replica: _published(replica))
        yield from self._flush(ctx, began)

    def _restore(self):
        state = self._state.read()
        if state is not None:
            self._trainer.wait_idle()
            self._replica.restore(state)
            self._input_ended = self._replica.input_ended
            if self._exporter is not None:  # exports of the lost run, newer than the restored model
                self._exporter.discard_after(self._replica.model_version)
            yield from self._emit(self._replica.resend())

    def _adopt(self, value, ctx) -> None:
        """After a rescale, an old replica's state under its key (:mod:`~pyflink_tensair.core.rescale`):
        read and cleared (its key serves no replica now), with the end-of-input timer it set;
        the open marker that follows hands what this subtask adopted to its replica."""
        old_replica, old_replicas = wire.rescale_of(value)
        state = self._state.read()
        if state is None:
            raise ProtocolError(f"the checkpoint holds no state of old replica {old_replica} of {old_replicas}: "
                                "it cannot be merged into the new replicas")
        self._adopted[old_replica] = state
        self._state.clear()
        ctx.timer_service().delete_event_time_timer(END_OF_TIME)

    def _rescale(self, old_replicas: int):
        self._trainer.wait_idle()
        adopted, self._adopted = self._adopted, {}
        self._discard_exports = self._exporter is not None  # a lost attempt's, once the merged version is known
        yield from self._emit(self._replica.adopt(old_replicas, adopted))

    def _snapshot(self):
        began = time.perf_counter()
        self._trainer.wait_idle()  # the batch it holds and the messages it queued are in the state
        yield from self._emit(self._trainer.take())
        state = self._replica.snapshot()
        self._snapshot_bytes = sum(int(v.nbytes) for v in state.values())
        self._snapshot_written = self._state.write(state)
        self._snapshot_ms = int((time.perf_counter() - began) * 1000)
        self._metrics.publish(force=True)

    def _flush(self, ctx, began: float):
        """Emits what the trainer has ready; while it still works, a processing-time timer
        brings the function back when the work should be done (no input may come before).

        Once the batches have ended, each callback waits for the trainer first: the callback
        that completes the replica (usually a peer's done marker) must emit its final model
        itself, since Flink fires no timer once the feedback input has ended too. The trainer
        never waits for input, so this wait always ends."""
        if self._input_ended:
            self._trainer.wait_idle()
        yield from self._emit(self._trainer.take())
        saturated = self._replica.saturated and not self._input_ended
        if self._credit_tag is not None and (saturated != self._reported_saturated or (
                saturated and self._replica.messages_applied != self._reported_applied
                and time.monotonic() - self._reported_at >= CREDIT_REPEAT_S)):
            # a saturated replica repeats its report while it applies its peers' messages: it is catching up
            yield self._credit_tag, f"{self._replica.id}:{int(saturated)}"
            self._reported_saturated = saturated
            self._reported_applied, self._reported_at = self._replica.messages_applied, time.monotonic()
        if self._flush_timer is None:
            # a busy trainer publishes when its work ends (Replica._drain); an idle one, whose model
            # changed and then rested, is asked to when the update falls due (on_timer)
            busy = self._trainer.busy
            wait_s = self._trainer.expected_remaining_s() if busy else (
                None if self._input_ended else self._replica.update_due_in_s())
            if wait_s is not None:
                timers = ctx.timer_service()
                self._flush_timer = timers.current_processing_time() + max(1, int(wait_s * 1000) + 1)
                timers.register_processing_time_timer(self._flush_timer)
        self._metrics.publish()  # thread mode: on the task thread, the only one that may enter Python
        self._callback_s += time.perf_counter() - began

    def _emit(self, events):
        for event in events:
            began = time.perf_counter()
            if isinstance(event, Prediction):
                out = types.prediction_row(event)
            elif isinstance(event, Metrics):
                event = dataclasses.replace(event, callback_s=round(self._callback_s, 6), codec_s=round(self._codec_s, 6),
                                            idle_s=None if self._trainer.idle_s is None else round(self._trainer.idle_s, 6))
                self._last = event
                out = self._metrics_tag, event.to_json()
            elif isinstance(event, Broadcast):
                out = self._feedback_tag, wire.encode_message(event.message, self._config.sparse_values)
            elif isinstance(event, FinalModel):
                out = self._models_tag, types.encode_final_model(event)
            elif isinstance(event, _ProbeRecord):
                out = self._probes_tag, event.text
            elif isinstance(event, ModeChange):
                out = self._mode_changes_tag, event.to_json()
            elif isinstance(event, DeadLetter):
                out = self._dead_letters_tag, event.to_json()
            elif isinstance(event, ModelUpdate):
                out = self._updates_tag, encode_update(event)
            else:
                raise ProtocolError(f"the replica returned an event of unknown type {type(event).__name__}")
            self._codec_s += time.perf_counter() - began
            if isinstance(event, FinalModel) and self._exporter is not None:
                self._export(self._replica)  # finished: the last version
            yield out
            if isinstance(event, FinalModel) and self._probe is not None and self._replica.id == 0:
                yield self._probes_tag, self._probe_record("final")  # finished: the model no longer changes

    def _export(self, replica: Replica) -> list:
        if replica.rescaling:  # its model is not the merged one yet
            return []
        if self._discard_exports:  # after a rescale: exports of an attempt lost before its first checkpoint
            self._exporter.discard_after(replica.model_version)
            self._discard_exports = False
        # A failed export (a full disk, a vanished folder) must not end the training it observes:
        # it is counted (the export_failures gauge) and logged, and the next one is tried later.
        try:
            self._exporter.export(replica.model.model, replica.model_version, replica.rows.maps())
        except OSError as err:
            self._export_failures += 1
            print(f"pyflink_tensair: exporting model version {replica.model_version} to "
                  f"{self._exporter.directory!r} failed ({err}); training goes on", file=sys.stderr, flush=True)
        return []

    def _probe_record(self, phase: str) -> str:
        # On the trainer thread between two of its items, or once the replica has finished. A
        # failing probe is reported, not raised: it must not end the training it observes.
        record = {"replica": self._replica.id, "phase": phase, "time": time.time(),
                  "local_step": self._replica.local_step, "model_version": self._replica.model_version}
        try:
            record["result"] = self._probe(self._replica.model.model)
        except Exception as err:  # the user's code
            record["error"] = repr(err)
        return json.dumps(record, default=float)
