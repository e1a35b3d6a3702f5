"""The replicas' Flink function: a translator between Flink's callbacks and one
:class:`~pyflink_tensair.core.replica.Replica` per subtask. The replica decides; this function
decodes what arrives, hands it to the replica's trainer, and emits the events that come back
through the side-output table (:data:`~.types.SIDE_OUTPUTS`). Beside it, in parts of their own:
the gauges (:mod:`.replica_metrics`), the probe and the exports (:mod:`.model_watch`), the credit
reports (:class:`~.loop.CreditReport`). Routing batches and fanning messages out to the replicas
happen on the JVM (:mod:`.routing`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Dict, List, Optional

from pyflink.datastream import KeyedCoProcessFunction, RuntimeContext

from ..config import PythonIn, TrainConfig
from ..core import wire
from ..core.events import FinalModel, Metrics, Prediction
from ..core.messages import DeadLetter, RefusedMessage, preview
from ..core.replica import Replica
from ..core.trainer import InlineTrainer, TrainerThread
from ..errors import ProtocolError, WireFormatError
from . import types
from .checkpointing import ChunkedState, ValueStates
from .environment import END_OF_TIME, subtask_index
from .loop import CreditReport
from .model_watch import ModelWatch
from .replica_metrics import HostStats, replica_gauges


def _published(replica: Replica) -> list:
    out: list = []
    replica.publish(out)
    return out


class ReplicaFunction(KeyedCoProcessFunction):
    """Input 1: an encoded batch or start marker; input 2: a peer's encoded message; both keyed by
    the replica's pinned key (checked).

    Main output: prediction rows. Side outputs: :data:`~.types.SIDE_OUTPUTS` (metrics, feedback,
    final models, probes, mode changes, dead letters, model updates, credit reports).

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
        self.replica: Optional[Replica] = None

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
        self.replica = Replica(index, model, cfg)
        self._trainer = TrainerThread(self.replica) if cfg.trainer_thread else InlineTrainer(self.replica)
        self._routes = {out.event: (out.tag(cfg.name), out.encode) for out in types.SIDE_OUTPUTS if out.event}
        self._credit = (types.CREDIT.tag(cfg.name), CreditReport()) if cfg.backpressure else None
        exporter = (ModelExporter(cfg.exports.dir, cfg.exports.every_s)
                    if cfg.exports is not None and index == 0 else None)
        self.watch = ModelWatch(index, self._probe, self._probe_every_s, exporter)
        self.stats = HostStats()
        self.last_metrics: Optional[Metrics] = None
        self._inputs = 0  # records on input 1: the position of bytes that carry no batch id
        self._timer_registered = False
        self._flush_timer: Optional[int] = None
        self._input_ended = False
        self._state = ChunkedState(ValueStates(runtime_context))
        self._adopted: Dict[int, dict] = {}  # after a rescale: old replica id -> its state (until open)
        self._gauges = replica_gauges(runtime_context.get_metrics_group().add_group("tensair"), self)

    def close(self):
        if getattr(self, "_trainer", None) is not None:
            self._trainer.close()
        if getattr(self, "_gauges", None) is not None:
            self._gauges.publish(force=True)  # the final values, while the task's metric group is open

    @staticmethod
    def _current_key(ctx):
        key = ctx.get_current_key()
        return key[0] if isinstance(key, (tuple, list)) else key  # Row(key) on the JVM

    def _own_key(self, ctx) -> bool:
        return self._current_key(ctx) == self._keys[self.replica.id]

    def _check_key(self, ctx) -> None:
        if not self._own_key(ctx):
            key = self._current_key(ctx)
            raise ProtocolError(
                f"subtask {self.replica.id} received key {key}, expected {self._keys[self.replica.id]}: "
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
            self.stats.codec_s += time.perf_counter() - began
            self._trainer.put_batch(batch)
            if self.watch.probe_due():
                self._trainer.call(lambda replica: [self.watch.probe_record(replica, "progress")])
            if self.watch.export_due():
                self._trainer.call(self.watch.export)  # between two steps, on the thread that owns the model
        yield from self._flush(ctx, began)

    def process_element2(self, value, ctx):
        began = time.perf_counter()
        self._check_key(ctx)
        try:
            message = wire.decode_message(value)
        except WireFormatError as err:  # counted against its sender, as far as its header tells
            origin = wire.message_origin(wire.as_bytes(value)) or (0, -1, 0, 0)
            message = RefusedMessage(origin[1], origin[2], origin[3], origin[0], str(err))
        self.stats.codec_s += time.perf_counter() - began
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
            if self.replica.update_due_in_s() == 0.0:
                self._trainer.call(lambda replica: _published(replica))
        yield from self._flush(ctx, began)

    def _restore(self):
        state = self._state.read()
        if state is not None:
            self._trainer.wait_idle()
            self.replica.restore(state)
            self._input_ended = self.replica.counts.input_ended
            self.watch.restored(self.replica.counts.model_version)
            yield from self._emit(self.replica.resend())

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
        self.watch.discard_pending = self.watch.exporter is not None  # a lost attempt's, once the merged version is known
        yield from self._emit(self.replica.adopt(old_replicas, adopted))

    def _snapshot(self):
        began = time.perf_counter()
        self._trainer.wait_idle()  # the batch it holds and the messages it queued are in the state
        yield from self._emit(self._trainer.take())
        state = self.replica.snapshot()
        self.stats.snapshot_bytes = sum(int(v.nbytes) for v in state.values())
        self.stats.snapshot_written = self._state.write(state)
        self.stats.snapshot_ms = int((time.perf_counter() - began) * 1000)
        self._gauges.publish(force=True)

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
        if self._credit is not None:
            tag, report = self._credit
            due = report.due(self.replica.id, saturated=self.replica.saturated and not self._input_ended,
                             applied=self.replica.counts.messages_applied)
            if due is not None:
                yield tag, due
        if self._flush_timer is None:
            # a busy trainer publishes when its work ends (Replica._drain); an idle one, whose model
            # changed and then rested, is asked to when the update falls due (on_timer)
            busy = self._trainer.busy
            wait_s = self._trainer.expected_remaining_s() if busy else (
                None if self._input_ended else self.replica.update_due_in_s())
            if wait_s is not None:
                timers = ctx.timer_service()
                self._flush_timer = timers.current_processing_time() + max(1, int(wait_s * 1000) + 1)
                timers.register_processing_time_timer(self._flush_timer)
        self._gauges.publish()  # thread mode: on the task thread, the only one that may enter Python
        self.stats.callback_s += time.perf_counter() - began

    def _emit(self, events):
        for event in events:
            began = time.perf_counter()
            if isinstance(event, Prediction):
                out = types.prediction_row(event)
            else:
                if isinstance(event, Metrics):  # with the host's profile
                    idle = self._trainer.idle_s
                    event = self.last_metrics = dataclasses.replace(
                        event, callback_s=round(self.stats.callback_s, 6), codec_s=round(self.stats.codec_s, 6),
                        idle_s=None if idle is None else round(idle, 6))
                route = self._routes.get(type(event))
                if route is None:
                    raise ProtocolError(f"the replica returned an event of unknown type {type(event).__name__}")
                tag, encode = route
                out = tag, encode(event, self._config)
            self.stats.codec_s += time.perf_counter() - began
            final = isinstance(event, FinalModel)
            if final and self.watch.exporter is not None:
                self.watch.export(self.replica)  # finished: the last version
            yield out
            if final and self.watch.probe is not None:
                yield self._routes[types.ProbeRecord][0], self.watch.probe_record(self.replica, "final").text
