"""The Flink jobs of the baselines: the Flink ML pattern (``flinkml``: the updater broadcasts the rows a
step changed; ``flinkml_full``: the whole model, as Flink ML itself does) and one model in one operator
(``single``). Our own systems are ``pyflink_tensair.train`` with a staleness bound.

Same batch source, codec, latency settings, place of their Python (`TrainConfig.python_in`: the workers,
the updater and the one model run where our replicas run) and TensorFlow thread budget as our replicas:
the baselines differ in their training pattern only.

``flinkml``::

    batches ─► route (JVM) ─► key_by (JVM) ─┐
                                            ├─► workers (N) ─► metrics
    feedback source (1) ─► to all (JVM) ─► key_by (JVM) ─┘   └─ gradients (side output) ─► updater (1)
          ▲ in-JVM queue                                                              │
          └────────────────────── feedback sink (1) ◄── model versions ◄─────────────┘

The plumbing (routing, keying, the loop, names and uids) is the same
:class:`~pyflink_tensair.flink.loop.FeedbackLoop` that ``train()`` uses.
"""

from __future__ import annotations

import time

from pyflink.common import Types
from pyflink.datastream import DataStream, KeyedCoProcessFunction, ProcessFunction, RuntimeContext

from pyflink_tensair.config import TrainConfig
from pyflink_tensair.core import wire
from pyflink_tensair.core.events import Metrics
from pyflink_tensair.core.messages import DoneMessage, GradientMessage
from pyflink_tensair.flink import types
from pyflink_tensair.flink.environment import prepare_environment
from pyflink_tensair.flink.execution import in_jvm, keyed_co_process, process
from pyflink_tensair.flink.environment import END_OF_TIME, subtask_index
from pyflink_tensair.flink.loop import FeedbackLoop

from .flinkml_protocol import GradientUpdate, ModelUpdate, Updater, UpdaterDone, Worker, WorkerDone


def _configure_tensorflow(config: TrainConfig) -> None:
    from pyflink_tensair.models.keras_adapter import configure_tensorflow_threads, shared_inter_op_threads

    # in the JVM: the workers and the updater of a TaskManager share one TensorFlow (as our replicas do)
    configure_tensorflow_threads(config.tf_intra_op_threads,
                                 shared_inter_op_threads(config.replicas + 1) if in_jvm(config.python_in) else None)


def _adapter(model, config: TrainConfig):
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    _configure_tensorflow(config)
    return KerasModelAdapter(load_model(model, seed=config.seed), sparse_values=config.sparse_values)


class _WorkerFunction(KeyedCoProcessFunction):
    def __init__(self, model, config: TrainConfig):
        self._model, self._config = model, config

    def open(self, runtime_context: RuntimeContext):
        self._worker = Worker(subtask_index(runtime_context), _adapter(self._model, self._config))
        self._tag = types.FEEDBACK.tag(self._config.name)
        self._timer = False

    def _emit(self, events):
        for event in events:
            if isinstance(event, Metrics):
                yield event.to_json()
            elif isinstance(event, GradientUpdate):
                # on the wire, steps count from 1: the gradient of model version v travels as step v + 1
                step = event.version + 1
                # TrainConfig.sparse_values halves the rows here as in our replicas' messages; the
                # updater's model broadcast stays float32 (those are weights: halving would round the model)
                message = GradientMessage(event.worker, step, step, event.gradients)
                yield self._tag, wire.encode_message(message, self._config.sparse_values)
            elif isinstance(event, WorkerDone):
                yield self._tag, wire.encode_message(DoneMessage(event.worker, self._worker.steps))

    def process_element1(self, value, ctx):
        if not self._timer:
            ctx.timer_service().register_event_time_timer(END_OF_TIME)
            self._timer = True
        if wire.peek_kind(value) == wire.KIND_START:
            return
        yield from self._emit(self._worker.on_batch(wire.decode_batch(value)))

    def process_element2(self, value, ctx):
        message = wire.decode_message(value)
        if isinstance(message, GradientMessage):
            yield from self._emit(self._worker.on_model(ModelUpdate(message.step, message.gradients)))

    def on_timer(self, timestamp, ctx):
        if timestamp == END_OF_TIME and not self._worker.input_ended:
            yield from self._emit(self._worker.on_input_end())


class _UpdaterFunction(ProcessFunction):
    def __init__(self, model, config: TrainConfig, workers: int, broadcast: str):
        self._model, self._config, self._workers, self._broadcast = model, config, workers, broadcast

    def open(self, runtime_context: RuntimeContext):
        self._updater = Updater(self._workers, _adapter(self._model, self._config), broadcast=self._broadcast)

    def process_element(self, value, ctx):
        message = wire.decode_message(bytes(value))
        if isinstance(message, GradientMessage):
            events = self._updater.on_gradient(GradientUpdate(message.sender, message.step - 1, message.gradients))
        else:
            events = self._updater.on_done(WorkerDone(message.sender))
        for event in events:
            if isinstance(event, ModelUpdate):
                yield wire.encode_message(GradientMessage(0, event.version, event.version, event.weights))
            elif isinstance(event, UpdaterDone):
                yield wire.encode_message(DoneMessage(0, event.version))


def flinkml(batches, *, model, config: TrainConfig, broadcast: str = "changed") -> DataStream:
    """The Flink ML pattern on ``batches``; returns the workers' metrics (JSON strings).
    ``broadcast``: ``"model"`` (Flink ML's own: the whole model every step) or ``"changed"``."""
    n = config.replicas
    # Routed, keyed and looped exactly as our replicas' inputs are (pyflink_tensair.flink.loop).
    loop = FeedbackLoop(batches, config)
    # config.python_in puts the workers and the updater where our replicas run
    workers = keyed_co_process(loop.keyed_inputs().connect(loop.keyed_feedback(1, include_sender=True)),
                               _WorkerFunction(model, config), Types.STRING(), config.python_in)
    workers = loop.training_operator(loop.named(workers, "workers", "workers"))
    gradients = loop.side_output(workers, types.FEEDBACK.tag(config.name))
    models = loop.named(process(gradients, _UpdaterFunction(model, config, n, broadcast), types.bytes_type(),
                                config.python_in), "updater", "updater").set_parallelism(1)
    if in_jvm(config.python_in):
        # one worker and the updater would share a task: two PEMJA interpreters on one thread
        # deadlock TensorFlow's PyGILState calls (seen: the task hung while opening the second)
        models = models.start_new_chain()
    loop.close(models, 1)
    return workers


class _SingleModel(ProcessFunction):
    """One Keras model fitted batch by batch with ``train_on_batch`` (the Kafka-ML / TensorFlow-IO way)."""

    def __init__(self, model, config: TrainConfig):
        self._model_argument, self._config = model, config

    def open(self, runtime_context: RuntimeContext):
        from pyflink_tensair.models.keras_adapter import load_model

        _configure_tensorflow(self._config)
        self._model = load_model(self._model_argument, seed=self._config.seed)
        self._steps = 0
        self._times = []

    def process_element(self, value, ctx):
        batch = wire.decode_batch(value)
        x = dict(batch.x) if isinstance(batch.x, dict) else batch.x
        loss = self._model.train_on_batch(x, batch.y)
        now = time.time()
        self._steps += 1
        self._times = (self._times + [now])[-32:]
        rate = (len(self._times) - 1) / (self._times[-1] - self._times[0]) if len(self._times) > 1 else 0.0
        scheduled = batch.meta.get("scheduled_at")
        yield Metrics(replica=0, phase="batch", time=now, local_step=self._steps, model_version=self._steps,
                       loss=float(loss if not isinstance(loss, (list, tuple)) else loss[0]), accuracy=None,
                       staleness=0, batches_per_s=rate, held_batches=0, messages_sent=0, bytes_sent=0,
                       dense_bytes_sent=0, messages_applied=0, duplicates_dropped=0, bound_overflows=0,
                       batch_id=batch.id, delay_s=None if scheduled is None else now - float(scheduled)).to_json()


def single(batches, *, model, config: TrainConfig) -> DataStream:
    from pyflink.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment(batches._j_data_stream.getExecutionEnvironment())
    prepare_environment(env, config)
    one = (process(batches, _SingleModel(model, config), Types.STRING(), config.python_in)
           .name(f"{config.name}: one model").uid(f"{config.name}-one-model").set_parallelism(1))
    # a batch source in the JVM would share the model's task: two PEMJA interpreters on one
    # thread (see flinkml); a model in worker processes PyFlink never chains to an operator of the other mode
    return one.start_new_chain() if in_jvm(config.python_in) else one
