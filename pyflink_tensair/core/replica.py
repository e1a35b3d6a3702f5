"""One model replica as a state machine: the DASGD protocol with a staleness bound.

The replica reacts to callbacks and returns what to emit; it never does IO::

    on_batch(batch)       -> predict, then train (or hold the batch while the bound stops it)
    on_gradient(message)  -> apply a peer's gradient (or note that the peer is done)
    on_input_end()        -> train what is held, then tell peers it is done

States of a replica::

    RUNNING --on_input_end--> DRAINING --held batches trained, DoneMessage sent--> DONE_SENT
    DONE_SENT --every peer's DoneMessage received and applied--> FINISHED (FinalModel emitted)

Its parts, one concept each: the update rule (:mod:`~pyflink_tensair.core.update_rules`:
synchronous SGD at staleness bound 0, DASGD otherwise; it talks to the replica through
:class:`~pyflink_tensair.core.update_rules.RuleHost`), the peers and the messages kept for them
(:class:`~pyflink_tensair.core.peers.PeerLog`: re-sent after a restore), the mode and the drift
protocol (:class:`~pyflink_tensair.core.auto_mode.ModeController`), a rescale's merge
(:class:`~pyflink_tensair.core.rescale.RescaleState`), the id tables' rows
(:class:`~pyflink_tensair.core.row_resets.RowResets`), the counters
(:class:`~pyflink_tensair.core.counters.ReplicaCounters`, read as the replica's attributes too) and
the model updates it publishes (:class:`~pyflink_tensair.core.model_updates.UpdatePublisher`).
docs/architecture.md draws them.

Example (two replicas of a NumPy model, messages routed by hand)::

    >>> from pyflink_tensair.testing import LinearModel
    >>> r0, r1 = (Replica(i, LinearModel(3, seed=0), replicas=2, staleness_bound=0) for i in range(2))
    >>> out = r0.on_batch(Batch(np.ones((4, 3), np.float32), np.ones(4, np.float32)))
    >>> [type(e).__name__ for e in out]
    ['Prediction', 'Broadcast', 'Metrics']
"""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Callable, Deque, Dict, List, Mapping, Optional, cast

import numpy as np

from ..config import Mode, TrainConfig, as_train_config
from ..errors import BadInputError, ConfigError, ProtocolError
from ..validation import is_int
from . import replica_state, wire
from .auto_mode import ModeController
from .counters import NAMES as COUNTER_NAMES, ReplicaCounters
from .events import Broadcast, Event, FinalModel, Metrics, ModeChange, Prediction, weights_digest
from .progress import Progress
from .guards import Refusal, check_batch, vet_peer_tensors
from .messages import (Batch, DeadLetter, DoneMessage, GradientMessage, ModeMessage, PeerMessage, RefusedMessage,
                       RescaleMessage, WeightsMessage, batch_letter, message_letter)
from .model_api import StepResult, TrainableModel
from .model_steps import ModelSteps
from .peer_gradients import check_model as check_peer_model
from .peers import PeerLog
from .rescale import Rescale, RescaleState
from .row_resets import Notices, RowResets
from .model_updates import UpdatePublisher
from .update_rules import UpdateRule, rule_for


class Replica:
    """See the module docstring. ``clock`` returns seconds (``time.time`` by default)."""

    def __init__(self, replica_id: int, model: TrainableModel, config: Optional[TrainConfig] = None, *,
                 clock: Callable[[], float] = time.time, **fields):
        """Replica ``replica_id`` of ``config.replicas``, trained as ``config`` says; ``fields`` set
        :class:`~pyflink_tensair.TrainConfig` fields of their own (``Replica(0, model,
        replicas=2, staleness_bound=0)``): the config's rules and defaults, not a second set."""
        config = as_train_config(TrainConfig() if config is None else config)
        if fields:
            config = dataclasses.replace(config, **fields)
        replicas = config.replicas
        if not is_int(replica_id) or not 0 <= replica_id < replicas:
            raise ConfigError(f"replica_id must be in [0, {replicas}). Received: replica_id={replica_id!r}")
        self.config = config
        self.id = replica_id
        self.replicas = replicas
        self.model = model
        self.staleness_bound = config.staleness_bound
        self.broadcast_every = config.broadcast_every
        self.buffer_capacity = config.buffer_capacity
        self.sparse_values = sparse_values = config.sparse_values  # how its messages' sparse rows travel
        self.peer_updates = config.peer_updates
        check_peer_model(self.peer_updates, model)
        self.guards = config.guards
        self.steps = ModelSteps(model, sparse_values=sparse_values)  # shapes, spec, timed and guarded calls
        self._clock = clock
        self.counts = ReplicaCounters()  # part of the snapshot
        self.peers = PeerLog(replica_id, replicas)  # part of the snapshot
        self.modes = ModeController(config.mode, config.auto.policy() if config.mode is Mode.AUTO else None)
        self.rule: UpdateRule = rule_for(self)  # synchronous SGD or DASGD, with the state only it needs
        self.held: Deque[Batch] = collections.deque()  # while the bound stops it (or serving, merging)
        self.rescale = RescaleState()
        self.rows = RowResets()  # id tables' rows: generations, ids, notices to pass on (core.row_resets)
        self.pressure_at = max(1, self.buffer_capacity // 4)
        self.saturated = False  # see _drain
        self.progress = Progress()  # scores and rate, for the metrics
        self.initial_digest = weights_digest(model.get_weights())
        # ModelUpdates: replica 0 publishes its weights as versioned updates (pyflink_tensair.core.model_updates)
        self.publisher = UpdatePublisher(config.updates, replica_id) if config.updates and replica_id == 0 else None

    # ------------------------------------------------------------------ what the replica is doing

    @property
    def rescaling(self) -> bool:
        """Whether the replica is merging the old replicas' models (a rescale, :meth:`adopt`)."""
        return self.rescale.merging is not None

    @property
    def held_batches(self) -> int:
        return len(self.held)  # batches waiting for the bound (or a merge), or to be served

    @property
    def training(self) -> bool:
        """Whether the next batch is trained on (``False``: predicted only)."""
        return self.modes.training

    @property
    def serving(self) -> bool:
        """In ``Mode.AUTO``, whether the replica serves: its model is then fixed, and peers'
        gradients and weights are received without being applied (:mod:`~.auto_mode`)."""
        return self.modes.serving

    @property
    def unacked_messages(self) -> int:
        """Messages sent that some peer has not acknowledged yet (kept for a re-send)."""
        return len(self.peers.unacked)

    # ------------------------------------------------------------------ callbacks

    def on_batch(self, batch: Batch) -> List[Event]:
        """A mini-batch arrives. Returns the events to emit."""
        if self.counts.input_ended:
            raise ProtocolError(f"replica {self.id} received a batch after its input ended")
        refusal = check_batch(batch, self.steps.spec, needs_labels=self.modes.mode is not Mode.SERVE,
                              max_bytes=self.guards.max_batch_bytes)
        if refusal is not None:
            return self.set_aside(batch_letter(refusal.reason, refusal.detail, batch))
        out: List[Event] = []
        if self.rescaling or not self.training:
            self.held.append(batch)  # trained on the merged model; or served in order by _drain
        elif self.held or self.rule.blocked():
            self.held.append(batch)
            if len(self.held) > self.buffer_capacity:
                self.counts.bound_overflows += 1
                self._train(self.held.popleft(), out)
            if self.rule.blocked():
                self.rule.flush(out)
        else:
            self._train(batch, out)
        self._drain(out)
        return out

    def set_aside(self, letter: DeadLetter, *, policy: bool = True) -> List[Event]:
        """Input this replica will not train on: counted, and emitted as a dead letter; with
        ``Guards(bad_input="fail")`` (and ``policy``) it fails the job instead. Peer messages
        are set aside whatever the policy (``policy=False``): a stream's bad records are the
        user's to decide on, a poisoned gradient never is."""
        if policy and self.guards.bad_input == "fail":
            raise BadInputError(f"replica {self.id}: a bad {letter.what} at position {letter.position} "
                                f"({letter.reason}): {letter.detail}. Guards(bad_input='dead_letter') sets such "
                                "input aside and goes on")
        self.counts.dead_letters += 1
        return [dataclasses.replace(letter, replica=self.id, time=self._clock())]

    def on_gradient(self, message: PeerMessage) -> List[Event]:
        """A peer's message arrives (in the order its channel delivered it)."""
        if message.sender == self.id or not 0 <= message.sender < self.replicas:
            if isinstance(message, RefusedMessage):  # its header is not to be trusted either
                self.rule.on_unattributable(message)  # synchronous replicas fail: whose step is missing?
                self.counts.messages_rejected += 1
                return self.set_aside(message_letter("not_a_record", message.detail, message), policy=False)
            raise ProtocolError(f"replica {self.id} received a message from sender {message.sender}")
        out: List[Event] = []
        if isinstance(message, RescaleMessage):
            self._on_rescale(message, out)
            return out
        if self.rescale.merging is not None:  # a peer that merged first: handled on the merged model
            self.rescale.merging.early.append(message)
            return out
        self.rescale.hear(message.sender, len(self.peers))  # a peer sends nothing else before its merge
        if isinstance(message, RefusedMessage):
            self._on_refused(message, out)
            self._drain(out)
            return out
        if isinstance(message, (GradientMessage, WeightsMessage)) and not self._is_repeat(message):
            # the notices' tables declared: notices held for later are checked against them
            misfit = self.rows.declare(message.notices) if isinstance(message, GradientMessage) else None
            if isinstance(message, GradientMessage) and misfit is None:
                self.rule.on_peer_notices(message)  # rows that changed hands, before the gradient that may use them
            refusal, message = (Refusal("wrong_shape", misfit), message) if misfit is not None else self.vet(message)
            if refusal is not None:
                self.counts.messages_rejected += 1
                out += self.set_aside(message_letter(refusal.reason, refusal.detail, message), policy=False)
                self.peers.note_acks(message)
                if isinstance(message, GradientMessage):
                    self.rule.skip_peer_step(message.sender, message.first_step, message.step)
                self._drain(out)
                return out
        self.peers.note_acks(message)
        if isinstance(message, ModeMessage):
            follow, origin = self.modes.on_peer_mode(message, self.peers[message.sender], self.counts.local_step)
            if follow:
                self._change_mode("peer_drift", None, origin, {}, out)
        elif isinstance(message, WeightsMessage):
            self.rule.on_peer_weights(message)
        elif isinstance(message, DoneMessage):
            self._on_done(message.sender, message.final_step)
        elif self.rule.is_duplicate(message):
            self.counts.duplicates_dropped += 1
            return out
        else:  # a gradient message (RefusedMessage returned above): applied as the rule says
            self.rule.on_peer_gradient(cast(GradientMessage, message))
        self._drain(out)
        return out

    def on_input_end(self) -> List[Event]:
        """This replica's input has ended: train what is held as peers allow, then finish."""
        self.counts.input_ended = True
        out: List[Event] = []
        self._drain(out)
        return out

    def resend(self) -> List[Event]:
        """After :meth:`restore`: a ``"restored"`` metrics record (where the replica resumes),
        then what some peer may not hold (:func:`~.replica_state.resend`)."""
        return replica_state.resend(self)

    # ------------------------------------------------------------------ what update rules use (RuleHost)

    def vet(self, message):
        """``(refusal, message)``: whether a peer's gradient or weights fit this model and are
        finite, and within the norm bound (:func:`~.guards.vet_peer_tensors`; clipped are counted)."""
        refusal, vetted, clipped = vet_peer_tensors(message, self.steps.shapes, self.guards)
        self.counts.gradients_clipped += clipped
        return refusal, vetted

    def send(self, message: PeerMessage, out: List[Event]) -> None:
        """Sends ``message`` to every peer (appends it to ``out``), counted and kept until acknowledged."""
        if not len(self.peers) and isinstance(message, (GradientMessage, ModeMessage)):
            return  # nobody to tell; the done marker still goes out, it ends the feedback channel
        message = dataclasses.replace(message, acks=self._acks())
        if isinstance(message, ModeMessage):
            self.modes.last_sent = message
        if isinstance(message, GradientMessage):
            notices = self.rows.take_outgoing()
            if notices:
                message = dataclasses.replace(message, notices=notices)
            self.peers.keep(message)
        self.counts.count_sent(message, self.sparse_values)
        out.append(Broadcast(message))

    def call_model(self, method, argument):
        """``method(argument)``, its time counted (:meth:`~.model_steps.ModelSteps.timed`)."""
        return self.steps.timed(method, argument)

    def apply_row_notices(self, notices: Notices, *, own: bool) -> None:
        """Resets the rows of id tables that changed hands (:mod:`~pyflink_tensair.core.row_resets`);
        notices from this replica's own batches go on to its peers in its next gradient message."""
        if not notices:
            return
        applied = self.rows.apply(notices, self.steps.row_reset(self.id, notices))
        if own and applied and len(self.peers):
            self.rows.pass_on(applied)

    # ------------------------------------------------------------------ peers

    def _acks(self):
        return self.peers.acks(self.rule.received_through)

    def _is_repeat(self, message) -> bool:
        if isinstance(message, WeightsMessage):
            return message.step <= self.peers[message.sender].weights_step
        return self.rule.is_duplicate(message)

    def _on_refused(self, message: RefusedMessage, out: List[Event]) -> None:
        self.counts.messages_rejected += 1
        out += self.set_aside(message_letter("not_a_record", message.detail, message), policy=False)
        if message.kind == wire.KIND_DONE:
            self._on_done(message.sender, message.step)
        elif message.kind == wire.KIND_GRADIENT and not self.rule.is_duplicate(message):
            # counted as received: the protocol goes on without it (synchronous replicas average
            # a zero in its place, all of them alike)
            self.rule.skip_peer_step(message.sender, message.first_step, message.step)
        # a lost mode message is made good by the next (its epoch); a lost weights message by the next one

    def _on_done(self, sender: int, final_step: int) -> None:
        """A peer is done. Its channel is FIFO and it sends its done marker after every message
        (also when it re-sends after a restore), so a step of it still missing now was in a
        message that could not be read at all (counted when it came): the protocol goes on
        without it instead of waiting for ever."""
        self.peers[sender].final = final_step
        self.rule.on_peer_done(sender, final_step)

    # ------------------------------------------------------------------ training and serving

    def _reach(self, batch: Batch, out: List[Event]) -> None:
        """The replica's input is at ``batch``: a peer's drift notice waiting for this position
        takes effect now (:meth:`ModeController.reach`)."""
        origin = self.modes.reach(batch.id)
        if origin is not None:
            self._change_mode("peer_drift", batch, origin, {}, out)

    def _batch_notices_applied(self, batch: Batch, out: List[Event]) -> bool:
        """Applies the batch's row notices; ``False`` (and the batch set aside) when they are malformed."""
        notices, malformed = self.rows.read_batch(batch)
        if malformed is not None:
            out += self.set_aside(batch_letter("not_a_record", malformed, batch))
            return False
        self.apply_row_notices(notices, own=True)
        return True

    def _serve(self, batch: Batch, out: List[Event]) -> None:
        self._reach(batch, out)
        if not self._batch_notices_applied(batch, out):
            return
        if self.training:  # a peer's drift reached here: this batch is the first of the new concept
            self._train(batch, out)
            return
        result, letter = self.steps.evaluate(batch)
        if result is None:
            out += self.set_aside(letter)
            return
        self.progress.note(result)
        self.counts.batches_served += 1
        out.append(self._prediction(batch, result))
        out.append(self.metrics_record("batch", batch, trained=False))
        statistics = self.modes.observe_served(result.loss, batch.id)
        if statistics is not None:
            self._change_mode("drift", batch, self.id, statistics, out)

    def _train(self, batch: Batch, out: List[Event]) -> None:
        self._reach(batch, out)
        if not self._batch_notices_applied(batch, out):
            return
        staleness = self.rule.staleness()
        result, letter = self.steps.own_step(batch, fused=self.rule.fused, with_gradients=bool(len(self.peers)))
        if result is None:
            out += self.set_aside(letter)
            return
        out.append(self._prediction(batch, result))
        if self.rule.skips(result):  # DASGD: a step that is not finite
            self.counts.steps_skipped += 1  # not applied (the fused step did not apply it either), not sent
            self.progress.note(result)
            out.append(self.metrics_record("batch", batch, staleness, trained=False))
            return
        self.counts.local_step += 1
        self.rule.own_step(result, out)
        self.progress.note(result)
        now = self._clock()
        self.progress.trained_at(now)
        if self.publisher is not None:
            self.publisher.note_step(self.counts.model_version, now * 1000.0)
        out.append(self.metrics_record("batch", batch, staleness, trained=True))
        if self.modes.observe_trained(result.loss):
            self._change_mode("converged", batch, self.id, {"loss": result.loss if result.loss is not None else float("nan")}, out)

    def _change_mode(self, reason: str, batch: Optional[Batch], origin: int, statistics: Dict[str, float],
                     out: List[Event]) -> None:
        """Tells the peers of the phase the policy is now in, and emits the change (nothing once
        the done marker is out: the feedback channel relays nothing after it)."""
        if self.counts.done_sent:
            return
        if not self.training:
            self.rule.flush(out)  # the last steps' gradients before the pause
        self.send(self.modes.message(self.id, self.counts.local_step, reason, origin), out)
        change = ModeChange(self.id, self._clock(), batch.id if batch is not None else -1, self.counts.local_step,
                            self.training, reason, origin, dict(statistics))
        if reason == "drift":
            self.modes.last_drift = change
        out.append(change)

    def _drain(self, out: List[Event]) -> None:
        """Trains held batches while the bound allows, then moves towards the end states."""
        counts = self.counts
        if self.rescaling:  # the merged model trains them: meanwhile, slow the input down
            self.saturated = len(self.held) >= self.pressure_at
            return
        while self.held and (not self.training or not self.rule.blocked()):
            batch = self.held.popleft()
            if self.training:
                self._train(batch, out)
            else:  # held while training, served now that the replica serves
                self._serve(batch, out)
        if self.held and self.rule.blocked():
            self.rule.flush(out)
        if counts.input_ended and not self.held and not counts.done_sent:
            self.rule.flush(out)
            self.send(DoneMessage(self.id, counts.local_step), out)
            counts.done_sent = True
            self.rule.on_done_sent()
        # a quarter of the buffer held while the bound stops this replica: a host that can slow the
        # batches down should (the credit gate, flink.loop); at a full buffer the oldest batch trains beyond the bound
        self.saturated = len(self.held) >= self.pressure_at and self.training and self.rule.blocked()
        self.publish(out)
        if counts.done_sent and not counts.finished and self._all_peers_done():
            counts.finished = True
            self.publish(out, force=True)  # the final version, whenever the last one went out
            out.append(self.metrics_record("final", None))
            out.append(FinalModel(self.id, counts.model_version, self.model.get_weights(), self.initial_digest,
                                  self.rows.maps()))

    def _all_peers_done(self) -> bool:
        """Every peer's done marker is in, and everything there is to apply is applied."""
        return all(peer.final is not None for peer in self.peers.states()) and self.rule.all_applied()

    # ------------------------------------------------------------------ model updates

    def publish(self, out: List[Event], *, force: bool = False) -> None:
        """Appends a model update to ``out`` when one is due (``ModelUpdates``; ``force``: if the
        model changed since the last one at all)."""
        if self.publisher is not None:
            out += self.publisher.due_updates(self.model, self.counts.model_version, self._clock() * 1000.0, self.rows,
                                              force=force)

    def update_due_in_s(self) -> Optional[float]:
        """Seconds until the next model update is due, ``None`` if none is pending (a host with
        timers comes back then: the model may change and then rest)."""
        if self.publisher is None:
            return None
        return self.publisher.due_in_s(self.counts.model_version, self._clock() * 1000.0)

    # ------------------------------------------------------------------ outputs

    def _prediction(self, batch: Batch, result: StepResult) -> Prediction:
        return Prediction(self.id, batch.id, self.counts.model_version, result.predictions,
                          result.loss, result.accuracy, batch.meta)

    def metrics_record(self, phase: str, batch: Optional[Batch], staleness: Optional[int] = None,
                       trained: Optional[bool] = None) -> Metrics:
        """The metrics record of this moment (``batch``: the one just handled, if any)."""
        return self.progress.metrics(self.id, phase, self._clock(), self.counts, self.steps.busy_s, batch=batch,
                                     trained=trained,
                                     staleness=self.rule.staleness() if staleness is None else staleness,
                                     held_batches=len(self.held))

    # ------------------------------------------------------------------ state

    def snapshot(self) -> Dict[str, np.ndarray]:
        """Everything the replica needs to resume, as a flat dict of plain arrays (its layout:
        :mod:`~pyflink_tensair.core.replica_state`). Nothing that reached the replica is lost."""
        return replica_state.snapshot(self)

    def restore(self, state: Dict[str, np.ndarray]) -> None:
        """Resumes from what :meth:`snapshot` returned."""
        replica_state.restore(self, state)

    def adopt(self, old_replicas: int, states: Mapping[int, Dict[str, np.ndarray]]) -> List[Event]:
        """After a restore with another replica count (this replica's state is new): takes over
        ``states``, the snapshots of the old replicas whose keys this replica's subtask now holds
        (by old id; maybe none), and starts the merge of all ``old_replicas`` models
        (:mod:`~pyflink_tensair.core.rescale`). Their held batches are trained here, once the
        models are merged; their counts add to this replica's. The protocol among the new
        replicas starts afresh: steps count from 0, the drift policy starts training.

        Returns a ``"restored"`` metrics record and this replica's rescale message for its peers
        (with one replica, the merged model at once).
        """
        models, versions = replica_state.take_over(self, old_replicas, states)
        self.rescale.merging = Rescale.start(self.id, self.replicas, old_replicas, models, versions)
        out: List[Event] = [self.metrics_record("restored", None)]
        if self.replicas > 1:
            out.append(Broadcast(self.rescale.merging.own))
        self._merge_when_complete(out)
        return out

    def _on_rescale(self, message: RescaleMessage, out: List[Event]) -> None:
        merging = self.rescale.merging
        if merging is None or not merging.receive(message):
            self.counts.duplicates_dropped += 1  # sent again after a restore, to a replica that merged already
            return
        self._merge_when_complete(out)

    def _merge_when_complete(self, out: List[Event]) -> None:
        merging = self.rescale.merging
        if merging is None or not merging.complete:
            return
        model, version = merging.merged()
        self.model.set_state(model)
        self.counts.model_version = version
        self.rescale.finish(self.replicas)
        if self.publisher is not None:  # servers catch up with the merged model at once
            self.publisher.reset()
            self.publish(out, force=True)
        for message in merging.early:
            out += self.on_gradient(message)
        self._drain(out)


def _counter_property(name: str) -> property:
    return property(lambda replica: getattr(replica.counts, name), doc=f"``counts.{name}``")


for _name in COUNTER_NAMES:  # the counters, read as the replica's attributes (replica.local_step)
    setattr(Replica, _name, _counter_property(_name))
