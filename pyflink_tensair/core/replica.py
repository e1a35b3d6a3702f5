"""One model replica as a state machine: the DASGD protocol with a staleness bound.

The replica reacts to three callbacks and returns what to emit; it never does IO::

    on_batch(batch)       -> predict, then train (or hold the batch while the bound stops it)
    on_gradient(message)  -> apply a peer's gradient (or note that the peer is done)
    on_input_end()        -> train what is held, then tell peers it is done

States of a replica::

    RUNNING --on_input_end--> DRAINING --held batches trained, DoneMessage sent--> DONE_SENT
    DONE_SENT --every peer's DoneMessage received and applied--> FINISHED (FinalModel emitted)

and, in ``Mode.AUTO``, its phase (:class:`~pyflink_tensair.drift.AutoPolicy`)::

    TRAINING --loss converged: ModeMessage(training=False) to peers--> SERVING
    SERVING --own drift, or a peer's drift ModeMessage: ModeMessage(training=True)--> TRAINING

Every batch is predicted in every mode and phase. **A serving replica's model is fixed**: the
peer gradients and weights that reach it while it serves are received (acknowledged, counted in
``messages_while_serving``, and counted for the staleness bound and the end of the run as if
applied) but not applied. Its drift detector tests whether the loss of a fixed model on the stream
has risen; a model that changes under it makes every change of the model look like a drift. With
two replicas and no bound it did: a replica that converged ahead of a lagging peer served while
applying that peer's gradients, computed on weights up to 29 steps behind; its loss rose until
OPTWIN fired, before any drift (``docs/use_cases.md``, the drift demo). What it leaves out belongs
to a concept it has converged on; when a drift sets it training again, its peers' gradients are
applied again. The price: a model its detector fails on (a drift missed, a convergence at a high
loss) stays as it is until a drift is detected, where a peer's gradients used to move it. (The
alternative, serving only once every replica has converged, keeps a converged replica training
for as long as its slowest peer's noisy convergence test takes, with nobody watching for a drift
meanwhile.)

The staleness bound holds among the replicas that train: a replica that serves has
told its peers the last step it trained, and they do not wait for steps it will not take; when it
trains again, its peers count its steps from their own step at that moment (its progress is
offset by the steps they took while it served), so it neither holds them back nor runs ahead.
Every mode message carries the sender's drift ``epoch`` (the drifts it knows of): a replica that
knows fewer trains again, so a drift notice lost across a restore is made good by the next one.
It also carries where the newest drift was found (``drift_at``, the batch id its detector fired
on). The replicas read the stream at different positions, and a peer's notice takes effect where
this replica's own input reaches that position, not when it arrives: a replica 60 batches behind
that trained at once learnt the new concept on the old one's batches, and its accuracy fell
before the drift (``docs/use_cases.md``). Until then its own detector still watches; a drift it
finds first is the same drift (no new epoch). Without a position (batches without ids) the
notice is followed at once. Batch ids that grow along the stream are the sources' (every source
of this package numbers its batches so); ids that do not leave a replica to its own detector.

Two update rules, chosen by the staleness bound ``s`` (:mod:`~pyflink_tensair.core.update_rules`:
:class:`~pyflink_tensair.core.update_rules.SynchronousSGD`, :class:`~pyflink_tensair.core.update_rules.DASGD`):

* ``s = 0`` (synchronous SGD): a replica computes its step-``k`` gradient without applying it and
  broadcasts it; when the step-``k`` gradients of every replica still training are in, it applies
  their average, summed in replica order. Every replica applies the same updates in the same
  order, so replicas stay bit-identical.
* ``s > 0`` or ``None`` (DASGD, TensAIR's rule): a replica applies its own gradient at once, sums it
  into an outgoing message sent every ``broadcast_every`` steps, and applies each peer message
  through its own optimizer in arrival order. With a bound ``s``, it starts local step ``k + 1``
  only once it has applied every live peer's gradients up to that peer's step ``k - s``;
  until then arriving batches wait in a bounded buffer. A blocked replica flushes its partial
  outgoing sum at once, so replicas can never wait on each other in a cycle. ``peer_updates``
  (:class:`~pyflink_tensair.config.PeerUpdates`) may weigh a peer's gradient down, and with
  ``average_every=K`` every K local steps the replica also sends its dense-gradient weights
  (a ``WeightsMessage``, after its gradients) and a receiver moves ``1 / replicas`` of the way
  towards them (by default every 8 steps: :class:`~pyflink_tensair.TrainConfig` holds every default).

Across a restore (Flink restarts the job from a checkpoint, and the messages that were inside the
feedback loop are in no checkpoint) the protocol re-sends instead of logging: every message
carries ``acks``, how far the sender's state holds each peer's messages; a replica keeps the
messages it sent until every peer has acknowledged them (part of its snapshot), and
:meth:`Replica.resend` sends them again after :meth:`Replica.restore`. Receivers drop the repeats
by ``(sender, step)``. A message a restored replica does not count as sent was sent after its
snapshot, so no restored peer can have applied it: nothing is applied twice, nothing is lost.

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
import functools
import json
import time
from typing import Callable, Deque, Dict, List, Mapping, Optional, cast

import numpy as np

from ..config import Mode, TrainConfig, as_train_config
from ..drift.policy import AutoPolicy
from ..errors import BadInputError, BatchRejectedError, ConfigError, ModelError, ProtocolError, WireFormatError
from . import wire
from .events import Broadcast, FinalModel, Metrics, ModeChange, Prediction, weights_digest
from .gradients import dense_nbytes, round_sparse_values, scale_gradients
from .guards import BatchSpec, Refusal, check_batch, check_norm, check_tensors, gradient_norm, variable_shapes
from .messages import (Batch, DeadLetter, DoneMessage, GradientMessage, Gradients, ModeMessage, PeerMessage,
                       RefusedMessage, RescaleMessage, SparseGradient, WeightsMessage, preview)
from .model_api import StepResult, TrainableModel
from ..validation import is_int
from .peer_updates import check_model as check_peer_model
from .peers import PeerState, ahead_arrays, peer_arrays, restore_peers
from .rescale import Rescale
from .row_resets import Notices, RowResets, TableNotices, batch_notices, decode_notices, encode_notices, merge_notices
from .update_rules import UpdateRule, rule_for
from .updates import UpdatePublisher

Event = object
_RATE_WINDOW = 32


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
        replicas, staleness_bound = config.replicas, config.staleness_bound
        if not is_int(replica_id) or not 0 <= replica_id < replicas:
            raise ConfigError(f"replica_id must be in [0, {replicas}). Received: replica_id={replica_id!r}")
        self.config = config
        self.id = replica_id
        self.replicas = replicas
        self.model = model
        self.staleness_bound = staleness_bound
        self.broadcast_every = config.broadcast_every
        self.buffer_capacity = buffer_capacity = config.buffer_capacity
        self.mode = config.mode
        self.policy = config.auto.policy() if self.mode is Mode.AUTO else None
        self.sparse_values = sparse_values = config.sparse_values  # how its messages' sparse rows travel
        self.peer_updates = config.peer_updates
        check_peer_model(self.peer_updates, model)
        self.guards = config.guards
        spec = getattr(model, "batch_spec", None)
        self._batch_spec: Optional[BatchSpec] = spec() if callable(spec) else None
        self._shapes = variable_shapes(model.get_weights())  # what a peer message must fit
        # the model's own train_step (TrainableModel) applies the gradient it returns, so it may
        # stand for compute then apply only where it rounds sparse rows as the peers decode them
        self._fused_step = callable(getattr(model, "train_step", None)) and (
            sparse_values == "float32" or getattr(model, "sparse_values", None) == sparse_values)
        self._clock = clock
        self._peers: Dict[int, PeerState] = {p: PeerState() for p in range(replicas) if p != replica_id}  # by id (part of the snapshot)
        # counters (part of the snapshot)
        self.local_step = 0
        self.model_version = 0
        self.messages_sent = 0
        self.gradient_messages_sent = 0
        self.bytes_sent = 0
        self.dense_bytes_sent = 0
        self.messages_applied = 0
        self.duplicates_dropped = 0
        self.bound_overflows = 0
        self.batches_served = 0  # predicted without training (Mode.SERVE, or AUTO while serving)
        self.dead_letters = 0  # input set aside (Guards): batches, records, lines, peer messages
        self.messages_rejected = 0  # peer messages refused (and set aside)
        self.gradients_clipped = 0  # peer gradients scaled down to Guards.max_gradient_norm
        self.steps_skipped = 0  # own steps whose gradient was not finite
        self.messages_while_serving = 0  # peer gradients and weights received while serving (AUTO): not applied
        self._mode_sequence = 0  # this replica's mode changes (AUTO)
        self._drift_epoch = 0  # drifts this replica knows of, its own and its peers' (AUTO)
        self._drift_at = -1  # the stream position (batch id) of the newest of them, -1: unknown
        self._pending_drift = -1  # a peer's drift this replica's input has not reached: its position
        self._pending_origin = -1  # the replica that found it
        self._position = -1  # the highest batch id this replica has trained or predicted
        # protocol state (and self._peers)
        self.rule: UpdateRule = rule_for(self)  # synchronous SGD or DASGD, with the state only it needs
        self._held: Deque[Batch] = collections.deque()
        self._unacked: Dict[int, GradientMessage] = {}  # step -> a message some peer has not acknowledged
        self.messages_resent = 0
        self._last_mode: Optional[ModeMessage] = None  # the newest mode change sent: re-sent after a restore
        self._rescale: Optional[Rescale] = None  # a merge of the old replicas' models in progress (adopt)
        # after the merge: this replica's own part, sent again after a restore until every peer has
        # sent it a message from after its own merge (a restore may bring a peer back mid-merge)
        self._rescale_sent: Optional[RescaleMessage] = None
        self._heard_since_merge: set = set()
        # id tables' rows: generations and ids (core.row_resets); notices to pass on in the next gradient message
        self.rows = RowResets()
        self._notices_out: Dict[str, TableNotices] = {}
        self.input_ended = False
        self.done_sent = False
        self.finished = False
        self.pressure_at = max(1, buffer_capacity // 4)
        self.saturated = False  # see _drain
        # observability only
        self.model_busy_s = 0.0  # seconds spent inside the model (gradients, updates, predictions)
        self.last_drift: Optional[ModeChange] = None  # this replica's own last drift (AUTO), for the gauges
        self._last_loss: Optional[float] = None
        self._last_accuracy: Optional[float] = None
        self._train_times: Deque[float] = collections.deque(maxlen=_RATE_WINDOW)
        self.initial_digest = weights_digest(model.get_weights())
        # ModelUpdates: replica 0 publishes its weights as versioned updates (pyflink_tensair.core.updates)
        self.publisher: Optional[UpdatePublisher] = None
        if config.updates is not None and replica_id == 0:
            self.publisher = UpdatePublisher(config.updates, replica_id)

    # ------------------------------------------------------------------ callbacks

    @property
    def synchronous(self) -> bool:
        """Whether the replica runs synchronous SGD (``staleness_bound == 0``; ``rule`` is the rule)."""
        return self.staleness_bound == 0

    @property
    def rescaling(self) -> bool:
        """Whether the replica is merging the old replicas' models (a rescale, :meth:`adopt`)."""
        return self._rescale is not None

    @property
    def held_batches(self) -> int:
        return len(self._held)

    @property
    def training(self) -> bool:
        """Whether the next batch is trained on (``False``: predicted only)."""
        if self.mode is Mode.SERVE:
            return False
        return self.policy.training if self.policy is not None else True

    @property
    def serving(self) -> bool:
        """In ``Mode.AUTO``, whether the replica serves: its model is then fixed, and peers'
        gradients and weights are received without being applied (module docstring)."""
        return self.policy is not None and not self.policy.training

    def on_batch(self, batch: Batch) -> List[Event]:
        """A mini-batch arrives. Returns the events to emit."""
        if self.input_ended:
            raise ProtocolError(f"replica {self.id} received a batch after its input ended")
        refusal = check_batch(batch, self._batch_spec, needs_labels=self.mode is not Mode.SERVE,
                              max_bytes=self.guards.max_batch_bytes)
        if refusal is not None:
            return self.set_aside(DeadLetter(refusal.reason, refusal.detail, "batch", "replica", batch.id,
                                             preview(batch_summary(batch))))
        out: List[Event] = []
        if self._rescale is not None:
            self._held.append(batch)  # trained on the merged model
        elif not self.training:
            self._held.append(batch)  # after any batch held while training: _drain serves them in order
        elif self._held or self.rule.blocked():
            self._held.append(batch)
            if len(self._held) > self.buffer_capacity:
                self.bound_overflows += 1
                self._train(self._held.popleft(), out)
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
        self.dead_letters += 1
        return [dataclasses.replace(letter, replica=self.id, time=self._clock())]

    def on_gradient(self, message: PeerMessage) -> List[Event]:
        """A peer's message arrives (in the order its channel delivered it)."""
        if message.sender == self.id or not 0 <= message.sender < self.replicas:
            if isinstance(message, RefusedMessage):  # its header is not to be trusted either
                self.rule.on_unattributable(message)  # synchronous replicas fail: whose step is missing?
                self.messages_rejected += 1
                return self.set_aside(_message_letter("not_a_record", message.detail, message), policy=False)
            raise ProtocolError(f"replica {self.id} received a message from sender {message.sender}")
        out: List[Event] = []
        if isinstance(message, RescaleMessage):
            self._on_rescale(message, out)
            return out
        if self._rescale is not None:  # a peer that merged first: handled on the merged model
            self._rescale.early.append(message)
            return out
        if self._rescale_sent is not None:  # a peer sends nothing else before its merge
            self._heard_since_merge.add(message.sender)
            if len(self._heard_since_merge) == len(self._peers):
                self._rescale_sent, self._heard_since_merge = None, set()
        if isinstance(message, RefusedMessage):
            self._on_refused(message, out)
            self._drain(out)
            return out
        if isinstance(message, (GradientMessage, WeightsMessage)) and not self._is_repeat(message):
            # the notices' tables declared: notices held for later are checked against them
            misfit = self.rows.declare(message.notices) if isinstance(message, GradientMessage) else None
            if isinstance(message, GradientMessage) and misfit is None:
                self.rule.on_peer_notices(message)  # rows that changed hands, before the gradient that may use them
            refusal, message = (Refusal("wrong_shape", misfit), message) if misfit is not None else self._admit(message)
            if refusal is not None:
                self.messages_rejected += 1
                out += self.set_aside(_message_letter(refusal.reason, refusal.detail, message), policy=False)
                self._note_acks(message)
                if isinstance(message, GradientMessage):
                    self.rule.skip_peer_step(message.sender, message.first_step, message.step)
                self._drain(out)
                return out
        self._note_acks(message)
        if isinstance(message, ModeMessage):
            self._on_mode(message, out)
        elif isinstance(message, WeightsMessage):
            self._on_weights(message)
        elif isinstance(message, DoneMessage):
            self._on_done(message.sender, message.final_step)
        elif self.rule.is_duplicate(message):
            self.duplicates_dropped += 1
            return out
        else:  # a gradient message (RefusedMessage returned above): applied as the rule says
            self.rule.on_peer_gradient(cast(GradientMessage, message))
        self._drain(out)
        return out

    def _is_repeat(self, message) -> bool:
        if isinstance(message, WeightsMessage):
            return message.step <= self._peers[message.sender].weights_step
        return self.rule.is_duplicate(message)

    def _admit(self, message):
        """``(refusal, message)``: whether a peer's gradient or weights fit this model and are
        finite (and within the norm bound; clipped to it with ``norm_action="clip"``)."""
        weights = isinstance(message, WeightsMessage)
        tensors = message.weights if weights else message.gradients
        refusal = check_tensors(tensors, self._shapes, dense_only=weights)
        if refusal is not None:
            return refusal, message
        norm = gradient_norm(tensors)
        refusal = check_norm(norm, None if weights else self.guards.max_gradient_norm)
        if refusal is not None and refusal.reason == "norm_bound" and self.guards.norm_action == "clip":
            self.gradients_clipped += 1
            return None, dataclasses.replace(message, gradients=scale_gradients(message.gradients,
                                                                      self.guards.max_gradient_norm / norm))
        return refusal, message

    def _on_refused(self, message: RefusedMessage, out: List[Event]) -> None:
        self.messages_rejected += 1
        out += self.set_aside(_message_letter("not_a_record", message.detail, message), policy=False)
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
        self._peers[sender].final = final_step
        self.rule.on_peer_done(sender, final_step)

    @property
    def unacked_messages(self) -> int:
        """Messages sent that some peer has not acknowledged yet (kept for a re-send)."""
        return len(self._unacked)

    def resend(self) -> List[Event]:
        """After :meth:`restore`: a ``"restored"`` metrics record (where the replica resumes),
        then the messages some peer may not hold (sent before the snapshot, never
        acknowledged), oldest first, and the done marker if it was sent."""
        out: List[Event] = [self._metrics("restored", None)]
        if self._rescale is not None or self._rescale_sent is not None:  # peers that hold it drop a repeat
            out.append(Broadcast(self._rescale.own if self._rescale is not None else self._rescale_sent))
        for step in sorted(self._unacked):
            out.append(Broadcast(dataclasses.replace(self._unacked[step], acks=self._acks())))
        if self._last_mode is not None:  # receivers keep only the newest: a repeat changes nothing
            out.append(Broadcast(dataclasses.replace(self._last_mode, acks=self._acks())))
        if self.done_sent:
            out.append(Broadcast(DoneMessage(self.id, self.local_step, self._acks())))
        self.messages_resent += len(out) - 1
        if self.publisher is not None:  # a snapshot of the restored version: servers catch up at once
            self.publisher.reset()
            self.publish(out, force=True)
        return out

    def on_input_end(self) -> List[Event]:
        """This replica's input has ended: train what is held as peers allow, then finish."""
        self.input_ended = True
        out: List[Event] = []
        self._drain(out)
        return out

    # ------------------------------------------------------------------ peers

    def _progress(self, peer: int) -> int:
        """``peer``'s step as the staleness bound counts it (:meth:`PeerState.progress`)."""
        return self._peers[peer].progress()

    def _acks(self):
        return tuple(0 if r == self.id else self.rule.received_through(r) for r in range(self.replicas))

    def _note_acks(self, message: PeerMessage) -> None:
        if len(message.acks) != self.replicas:
            return  # a sender that acknowledges nothing (e.g. an older one): keep what it has not confirmed
        peer = self._peers[message.sender]
        peer.acked = max(peer.acked, message.acks[self.id])
        confirmed = min(p.acked for p in self._peers.values())
        for step in [s for s in self._unacked if s <= confirmed]:
            del self._unacked[step]

    # ------------------------------------------------------------------ training

    def _reach(self, batch: Batch, out: List[Event]) -> None:
        """The replica's input is at ``batch``: a peer's drift notice waiting for this position
        takes effect now (module docstring)."""
        self._position = max(self._position, batch.id)
        if 0 <= self._pending_drift <= batch.id:
            self._pending_drift = -1
            if self.policy.on_peer_drift():
                self._change_mode("peer_drift", batch, self._pending_origin, {}, out)

    def _apply_notices(self, notices: Notices, *, own: bool) -> None:
        """Resets the rows of id tables that changed hands (:mod:`~pyflink_tensair.core.row_resets`);
        notices from this replica's own batches go on to its peers in its next gradient message."""
        if not notices:
            return
        reset = getattr(self.model, "reset_rows", None)
        if reset is None:
            raise ModelError(f"replica {self.id} received row notices of id tables {sorted(notices)}, but its model "
                             "has no reset_rows (a TrainableModel over a Keras model with Embedding layers has)")
        applied = self.rows.apply(notices, reset)
        if own and applied and self._peers:
            self._notices_out = merge_notices(self._notices_out, applied)

    def _batch_notices_applied(self, batch: Batch, out: List[Event]) -> bool:
        """Applies the batch's row notices; ``False`` (and the batch set aside) when they are malformed."""
        try:
            notices = batch_notices(batch)
            misfit = self.rows.declare(notices)
            if misfit is not None:
                raise WireFormatError(misfit)
        except WireFormatError as err:
            out += self.set_aside(DeadLetter("not_a_record", str(err), "batch", "replica", batch.id,
                                             preview(batch_summary(batch))))
            return False
        self._apply_notices(notices, own=True)
        return True

    def _serve(self, batch: Batch, out: List[Event]) -> None:
        self._reach(batch, out)
        if not self._batch_notices_applied(batch, out):
            return
        if self.training:  # a peer's drift reached here: this batch is the first of the new concept
            self._train(batch, out)
            return
        result = self._guarded_call(self.model.evaluate, batch, out)
        if result is None:
            return
        self._note_scores(result)
        self.batches_served += 1
        out.append(self._prediction(batch, result))
        out.append(self._metrics("batch", batch, trained=False))
        if self.policy is not None and self.policy.observe(result.loss) == "drift":
            if self._pending_drift >= 0:  # found here before the input reached a peer's position for it: the same drift
                self._pending_drift = -1
            else:
                self._drift_epoch += 1
            self._drift_at = batch.id
            self._change_mode("drift", batch, self.id, self.policy.last_drift.statistics, out)

    # ------------------------------------------------------------------ modes (AUTO)

    def _change_mode(self, reason: str, batch: Optional[Batch], origin: int, statistics: Dict[str, float],
                     out: List[Event]) -> None:
        """Tells the peers of the phase the policy is now in, and emits the change (nothing once
        the done marker is out: the feedback channel relays nothing after it)."""
        if self.done_sent:
            return
        training = self.policy.training
        if not training:
            self.rule.flush(out)  # the last steps' gradients before the pause
        self._mode_sequence += 1
        self._send(ModeMessage(self.id, self.local_step, self._mode_sequence, training, reason, origin,
                               self._drift_epoch, drift_at=self._drift_at), out)
        change = ModeChange(self.id, self._clock(), batch.id if batch is not None else -1, self.local_step,
                            training, reason, origin, dict(statistics))
        if reason == "drift":
            self.last_drift = change
        out.append(change)

    def _on_mode(self, message: ModeMessage, out: List[Event]) -> None:
        peer = self._peers[message.sender]
        if message.sequence <= peer.mode_sequence:
            return  # a repeat (re-sent after a restore): only the newest counts
        peer.mode_sequence = message.sequence
        if peer.paused and message.training:  # it resumes level with this replica
            peer.resume(self.local_step)
        peer.paused = not message.training
        if message.epoch > self._drift_epoch:
            self._drift_epoch, self._drift_at = message.epoch, message.drift_at
            if self.policy is None:
                return
            if message.drift_at > self._position:  # this replica's input is still before it: follow it there
                if self._pending_drift < 0:
                    self._pending_drift, self._pending_origin = message.drift_at, message.origin
            elif self.policy.on_peer_drift():
                self._change_mode("peer_drift", None, message.origin, {}, out)

    def _on_weights(self, message: WeightsMessage) -> None:
        """Periodic averaging: this replica's weights move ``1 / replicas`` of the way towards
        the sender's (the sender's gradients up to its step are applied already: FIFO)."""
        peer = self._peers[message.sender]
        if message.step <= peer.weights_step:
            self.duplicates_dropped += 1
            return
        peer.weights_step = message.step
        if self.serving:  # a serving model stays fixed (module docstring)
            self.messages_while_serving += 1
            return
        own = self.model.get_weights()
        share = 1.0 / self.replicas
        self._model_call(self.model.set_weights, {name: (own[name] + share * (peer - own[name])).astype(own[name].dtype)
                                                  for name, peer in message.weights.items()})
        self.model_version += 1

    def _train(self, batch: Batch, out: List[Event]) -> None:
        self._reach(batch, out)
        if not self._batch_notices_applied(batch, out):
            return
        staleness = self.rule.staleness()
        fused = self.rule.fused
        if fused:  # computed and applied in one call; the gradient leaves the model only for peers
            result = self._guarded_call(functools.partial(self.model.train_step, return_gradients=bool(self._peers)),
                                        batch, out)
        else:
            result = self._guarded_call(self.model.compute_gradients, batch, out)
            if result is not None and self.sparse_values != "float32" and self._peers:  # as the peers will decode them
                result = dataclasses.replace(result, gradients=round_sparse_values(result.gradients, np.dtype(self.sparse_values)))
        if result is None:
            return
        out.append(self._prediction(batch, result))
        if self.rule.skips(result):  # DASGD: a step that is not finite
            self.steps_skipped += 1  # not applied (the fused step did not apply it either), not sent
            self._note_scores(result)
            out.append(self._metrics("batch", batch, staleness, trained=False))
            return
        self.local_step += 1
        self.rule.own_step(result, out)
        self._note_scores(result)
        self._train_times.append(self._clock())
        if self.publisher is not None:
            self.publisher.note_step(self.model_version, self._train_times[-1] * 1000.0)
        out.append(self._metrics("batch", batch, staleness, trained=True))
        if self.policy is not None and self.policy.observe(result.loss) == "converged":
            self._change_mode("converged", batch, self.id, {"loss": result.loss if result.loss is not None else float("nan")}, out)

    def _guarded_call(self, method, batch: Batch, out: List[Event]):
        """``method(batch)``, or ``None`` when the model refused the batch (its step not applied):
        then the batch is set aside."""
        try:
            return self._model_call(method, batch)
        except BatchRejectedError as err:
            out += self.set_aside(DeadLetter("rejected_by_model", str(err), "batch", "replica", batch.id,
                                             preview(batch_summary(batch))))
            return None

    def _send(self, message: PeerMessage, out: List[Event]) -> None:
        if not self._peers and isinstance(message, (GradientMessage, ModeMessage)):
            return  # nobody to tell; the done marker still goes out, it ends the feedback channel
        self.messages_sent += 1
        message = dataclasses.replace(message, acks=self._acks())
        if isinstance(message, ModeMessage):
            self._last_mode = message
        if isinstance(message, GradientMessage):
            if self._notices_out:
                message, self._notices_out = dataclasses.replace(message, notices=self._notices_out), {}
            self.gradient_messages_sent += 1
            self.bytes_sent += _payload_nbytes(message.gradients, self.sparse_values)
            self.dense_bytes_sent += dense_nbytes(message.gradients)
            self._unacked[message.step] = message
        elif isinstance(message, WeightsMessage):
            self.bytes_sent += dense_nbytes(message.weights)
            self.dense_bytes_sent += dense_nbytes(message.weights)
        out.append(Broadcast(message))

    def _drain(self, out: List[Event]) -> None:
        """Trains held batches while the bound allows, then moves towards the end states."""
        if self._rescale is not None:  # the merged model trains them: meanwhile, slow the input down
            self.saturated = len(self._held) >= self.pressure_at
            return
        while self._held and (not self.training or not self.rule.blocked()):
            batch = self._held.popleft()
            if self.training:
                self._train(batch, out)
            else:  # held while training, served now that the replica serves
                self._serve(batch, out)
        if self._held and self.rule.blocked():
            self.rule.flush(out)
        if self.input_ended and not self._held and not self.done_sent:
            self.rule.flush(out)
            self._send(DoneMessage(self.id, self.local_step), out)
            self.done_sent = True
            self.rule.on_done_sent()
        # a quarter of the buffer held while the bound stops this replica: a host that can slow the
        # batches down should (the credit gate, flink.loop); at a full buffer the oldest batch trains beyond the bound
        self.saturated = len(self._held) >= self.pressure_at and self.training and self.rule.blocked()
        self.publish(out)
        if self.done_sent and not self.finished and self._all_peers_done():
            self.finished = True
            self.publish(out, force=True)  # the final version, whenever the last one went out
            out.append(self._metrics("final", None))
            out.append(FinalModel(self.id, self.model_version, self.model.get_weights(), self.initial_digest,
                                      self.rows.maps()))

    def publish(self, out: List[Event], *, force: bool = False) -> None:
        """Appends a model update to ``out`` when one is due (``ModelUpdates``; ``force``: if the
        model changed since the last one at all)."""
        publisher = self.publisher
        if publisher is None:
            return
        now_ms = self._clock() * 1000.0
        wait = publisher.due_in_ms(self.model_version, now_ms)
        if wait is not None and (force or wait <= 0):
            out.append(publisher.publish(self.model.get_weights(), self.model_version, now_ms, self.rows))

    def update_due_in_s(self) -> Optional[float]:
        """Seconds until the next model update is due, ``None`` if none is pending (a host with
        timers comes back then: the model may change and then rest)."""
        if self.publisher is None:
            return None
        wait = self.publisher.due_in_ms(self.model_version, self._clock() * 1000.0)
        return None if wait is None else max(0.0, wait / 1000.0)

    def _all_peers_done(self) -> bool:
        """Every peer's done marker is in, and everything there is to apply is applied."""
        return all(peer.final is not None for peer in self._peers.values()) and self.rule.all_applied()

    # ------------------------------------------------------------------ outputs

    def _note_scores(self, result: StepResult) -> None:
        if result.loss is not None:
            self._last_loss = result.loss
        if result.accuracy is not None:
            self._last_accuracy = result.accuracy

    def _model_call(self, method, argument):
        started = time.perf_counter()
        try:
            return method(argument)
        finally:
            self.model_busy_s += time.perf_counter() - started

    def _prediction(self, batch: Batch, result: StepResult) -> Prediction:
        return Prediction(self.id, batch.id, self.model_version, result.predictions,
                          result.loss, result.accuracy, batch.meta)

    def batches_per_s(self) -> float:
        times = self._train_times
        if len(times) < 2 or times[-1] <= times[0]:
            return 0.0
        return (len(times) - 1) / (times[-1] - times[0])

    def _metrics(self, phase: str, batch: Optional[Batch], staleness: Optional[int] = None,
                 trained: Optional[bool] = None) -> Metrics:
        now = self._clock()
        scheduled = batch.meta.get("scheduled_at") if batch is not None else None
        return Metrics(
            replica=self.id, phase=phase, time=now, local_step=self.local_step,
            model_version=self.model_version, loss=self._last_loss, accuracy=self._last_accuracy,
            staleness=self.rule.staleness() if staleness is None else staleness,
            batches_per_s=self.batches_per_s(), held_batches=len(self._held),
            messages_sent=self.messages_sent, bytes_sent=self.bytes_sent,
            dense_bytes_sent=self.dense_bytes_sent, messages_applied=self.messages_applied,
            duplicates_dropped=self.duplicates_dropped, bound_overflows=self.bound_overflows,
            batch_id=batch.id if batch is not None else -1,
            delay_s=(now - scheduled) if isinstance(scheduled, (int, float)) else None,
            model_busy_s=round(self.model_busy_s, 6), trained=trained, dead_letters=self.dead_letters,
            messages_rejected=self.messages_rejected, gradients_clipped=self.gradients_clipped,
            steps_skipped=self.steps_skipped, gradient_messages_sent=self.gradient_messages_sent)

    # ------------------------------------------------------------------ state

    # The counters of a snapshot, by name: an int64 entry ``counters/<name>`` each, ``<name>`` the
    # attribute's without its leading underscore; the update rule names its own (UpdateRule.counters).
    # A counter a snapshot lacks keeps its value, a name the replica does not know is ignored.
    _COUNTERS = ("local_step", "model_version", "messages_sent", "bytes_sent", "dense_bytes_sent",
                 "messages_applied", "duplicates_dropped", "bound_overflows", "input_ended", "done_sent",
                 "finished", "messages_resent", "batches_served", "_mode_sequence", "_drift_epoch", "dead_letters",
                 "messages_rejected", "gradients_clipped", "steps_skipped", "messages_while_serving",
                 "_drift_at", "_pending_drift", "_pending_origin", "_position", "gradient_messages_sent")
    _FLAGS = ("input_ended", "done_sent", "finished")
    # Snapshots of the releases before 0.2.0: one int64 array ``counters``, these names in this order
    # (older releases wrote fewer of them). Frozen: restore() still reads it.
    _POSITIONAL_COUNTERS = ("local_step", "model_version", "messages_sent", "bytes_sent", "dense_bytes_sent",
                            "messages_applied", "duplicates_dropped", "bound_overflows", "sync_done",
                            "outgoing_first", "input_ended", "done_sent", "finished", "messages_resent",
                            "batches_served", "mode_sequence", "drift_epoch", "dead_letters", "messages_rejected",
                            "gradients_clipped", "steps_skipped", "unattributed", "messages_while_serving",
                            "drift_at", "pending_drift", "pending_origin", "position")

    def snapshot(self) -> Dict[str, np.ndarray]:
        """Everything the replica needs to resume, as a flat dict of plain arrays.

        Counters are saved by name (``counters/<name>``, one int64 each). Held batches, an unsent
        outgoing sum and pending synchronous contributions are kept as encoded records (``uint8``
        arrays), so nothing that reached the replica is lost.
        """
        state = {f"model/{k}": np.array(v) for k, v in self.model.get_state().items()}
        counters = {name.lstrip("_"): int(getattr(self, name)) for name in self._COUNTERS}
        counters.update(self.rule.counters())
        state.update((f"counters/{name}", np.array(value, np.int64)) for name, value in counters.items())
        per_peer = peer_arrays(self._peers, self.replicas)
        state["applied"], state["peer_final"] = per_peer.pop("applied"), per_peer.pop("peer_final")
        for i, batch in enumerate(self._held):
            state[f"held/{i:06d}"] = _as_uint8(wire.encode_batch(batch))
        state.update(self.rule.snapshot())  # DASGD: "outgoing"; synchronous SGD: "sync/<step>/<sender>"
        state.update(ahead_arrays(self._peers))
        for step, message in self._unacked.items():
            state[f"unacked/{step:012d}"] = _as_uint8(wire.encode_message(message, self.sparse_values))
        state.update(per_peer)  # acked_by, peer_mode, peer_paused, peer_offset, peer_weights
        if self._last_mode is not None:
            state["last_mode"] = _as_uint8(wire.encode_message(self._last_mode))
        if self.policy is not None:
            state["policy"] = _as_uint8(json.dumps(self.policy.snapshot(), separators=(",", ":")).encode())
        if self._rescale is not None:
            state.update(self._rescale.snapshot())
        if self._rescale_sent is not None:
            state["rescale_sent"] = _as_uint8(wire.encode_message(self._rescale_sent))
            state["rescale_heard"] = np.array(sorted(self._heard_since_merge), np.int64)
        state.update(self.rows.snapshot())
        if self._notices_out:
            state["notices_out"] = _as_uint8(encode_notices(self._notices_out).encode("utf-8"))
        return state

    def restore(self, state: Dict[str, np.ndarray]) -> None:
        """Resumes from what :meth:`snapshot` returned (weights, slots, counters, held batches),
        this release's or an older one's."""
        self.model.set_state({k[len("model/"):]: v for k, v in state.items() if k.startswith("model/")})
        counters = _snapshot_counters(state, self._POSITIONAL_COUNTERS)
        for name in self._COUNTERS:
            if name.lstrip("_") in counters:
                value = counters[name.lstrip("_")]
                setattr(self, name, bool(value) if name in self._FLAGS else value)
        self.rule.restore(state, counters)
        self._peers = restore_peers(state, self._peers, self.replicas)
        self._held = collections.deque(wire.decode_batch(state[k].tobytes()) for k in sorted(state) if k.startswith("held/"))
        self._unacked = {}
        for key in sorted(k for k in state if k.startswith("unacked/")):
            message = wire.decode_message(state[key].tobytes())
            self._unacked[message.step] = message
        self._last_mode = wire.decode_message(state["last_mode"].tobytes()) if "last_mode" in state else None
        if self.policy is not None and "policy" in state:
            self.policy = AutoPolicy.restore(json.loads(state["policy"].tobytes().decode()))
        self._rescale = Rescale.restore(self.id, state)
        self._rescale_sent = (cast(RescaleMessage, wire.decode_message(state["rescale_sent"].tobytes()))
                              if "rescale_sent" in state else None)
        self._heard_since_merge = {int(p) for p in state.get("rescale_heard", [])}
        self.rows.restore(state)
        self._notices_out = decode_notices(state["notices_out"].tobytes().decode("utf-8")) if "notices_out" in state else {}

    # Counts that add up over the replicas (the job's totals): an adopting replica adds the old ones'.
    _TOTALS = ("messages_sent", "bytes_sent", "dense_bytes_sent", "messages_applied", "duplicates_dropped",
               "bound_overflows", "messages_resent", "batches_served", "dead_letters", "messages_rejected",
               "gradients_clipped", "steps_skipped", "messages_while_serving", "gradient_messages_sent")

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
        versions = {}
        for old in sorted(states):
            state = states[old]
            if "rescale/meta" in state or any(k.startswith("sync/") for k in state):
                raise ProtocolError(
                    f"old replica {old}'s state was saved {'inside a merge of an earlier rescale' if 'rescale/meta' in state else 'by a synchronous replica'}"
                    f": it cannot be merged. Resume with the replica count it was saved with ({old_replicas}) and "
                    "rescale from a later checkpoint or savepoint")
            counters = _snapshot_counters(state, self._POSITIONAL_COUNTERS)
            for name in self._TOTALS:
                setattr(self, name, getattr(self, name) + counters.get(name, 0))
            self._position = max(self._position, counters.get("position", -1))
            versions[old] = counters.get("model_version", 0)
            self._held.extend(wire.decode_batch(state[k].tobytes()) for k in sorted(state) if k.startswith("held/"))
            self.rows.adopt(state)
        models = {old: {k[len("model/"):]: v for k, v in state.items() if k.startswith("model/")}
                  for old, state in states.items()}
        self._rescale = Rescale.start(self.id, self.replicas, old_replicas, models, versions)
        out: List[Event] = [self._metrics("restored", None)]
        if self.replicas > 1:
            out.append(Broadcast(self._rescale.own))
        self._merge_when_complete(out)
        return out

    def _on_rescale(self, message: RescaleMessage, out: List[Event]) -> None:
        if self._rescale is None or not self._rescale.receive(message):
            self.duplicates_dropped += 1  # sent again after a restore, to a replica that merged already
            return
        self._merge_when_complete(out)

    def _merge_when_complete(self, out: List[Event]) -> None:
        rescale = self._rescale
        if rescale is None or not rescale.complete:
            return
        model, version = rescale.merged()
        self.model.set_state(model)
        self.model_version = version
        self._rescale = None
        if self.replicas > 1:
            self._rescale_sent, self._heard_since_merge = rescale.own, set()
        if self.publisher is not None:  # servers catch up with the merged model at once
            self.publisher.reset()
            self.publish(out, force=True)
        for message in rescale.early:
            out += self.on_gradient(message)
        self._drain(out)


def _snapshot_counters(state: Dict[str, np.ndarray], positional) -> Dict[str, int]:
    """A snapshot's counters by name: its ``counters/<name>`` entries, or an older release's
    ``counters`` array (``positional`` names its values in order)."""
    counters = dict(zip(positional, (int(v) for v in state["counters"].tolist()))) if "counters" in state else {}
    counters.update((key[len("counters/"):], int(value)) for key, value in state.items() if key.startswith("counters/"))
    return counters


def _message_letter(reason: str, detail: str, message) -> DeadLetter:
    first = getattr(message, "first_step", message.step)
    return DeadLetter(reason, detail, "message", "replica", message.step,
                      f"{type(message).__name__} from replica {message.sender}, steps {first} .. {message.step}")


def batch_summary(batch: Batch) -> str:
    """A batch in a few words, for a dead letter's preview."""
    arrays = batch.x.items() if isinstance(batch.x, dict) else [("x", batch.x)]
    parts = [f"{name} {a.dtype}{list(a.shape)}" for name, a in arrays]
    if batch.y is not None:
        parts.append(f"y {batch.y.dtype}{list(batch.y.shape)}")
    return ", ".join(parts)


def _payload_nbytes(gradients: Gradients, sparse_values: str) -> int:
    """A message's tensor bytes on the wire (:func:`wire.encode_message` with ``sparse_values``)."""
    return sum(g.indices.nbytes + wire.sparse_values_on_wire(g.values, sparse_values).nbytes
               if isinstance(g, SparseGradient) else g.nbytes for g in gradients.values())


def _as_uint8(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8).copy()
