"""The replica's two update rules, one interface: :class:`SynchronousSGD` (staleness bound
``s = 0``) and :class:`DASGD` (``s > 0`` or ``None``, TensAIR's rule).

:class:`~pyflink_tensair.core.replica.Replica` picks its rule from ``TrainConfig.staleness_bound``
(:func:`rule_for`) and asks it everything that differs between the two: what its own step does
once computed, what a peer's gradient does, when a step must wait for peers (the bound), what is a
repeat, how far this replica holds a peer's messages, when everything is applied. A rule holds the
state only it needs (the pending contributions, the outgoing sum) and calls back into its replica,
which owns the model, the counters, the peers and the events, through :class:`RuleHost`: nothing
else of the replica, so that this module needs nothing of the replica's.

Example (a synchronous replica's first step waits for its peer's)::

    >>> from pyflink_tensair.core.replica import Replica
    >>> from pyflink_tensair.testing import LinearModel, make_regression_batches
    >>> r0 = Replica(0, LinearModel(3, seed=0), replicas=2, staleness_bound=0)
    >>> type(r0.rule).__name__, type(Replica(0, LinearModel(3), staleness_bound=2).rule).__name__
    ('SynchronousSGD', 'DASGD')
    >>> _ = r0.on_batch(make_regression_batches(1, 3)[0])
    >>> r0.rule.blocked(), r0.rule.staleness(), r0.model_version
    (True, 1, 0)
    >>> _ = r0.on_gradient(GradientMessage(1, 1, 1, {"w": np.zeros(3), "b": np.zeros(1)}))
    >>> r0.rule.blocked(), r0.rule.completed, r0.model_version  # the average of both applied
    (False, 1, 1)
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import math
from typing import Any, Dict, List, Mapping, Optional, Protocol, Tuple, cast

import numpy as np

from .events import Event
from ..config import Guards, PeerUpdates
from ..errors import ProtocolError
from . import wire
from .counters import ReplicaCounters
from .gradients import average_gradients, sum_gradients
from .guards import Refusal, check_norm, gradient_norm
from .messages import GradientMessage, Gradients, PeerMessage, RefusedMessage, SparseGradient, WeightsMessage
from .model_api import StepResult, TrainableModel
from .model_steps import ModelSteps
from .peer_gradients import peer_update
from .peers import PeerLog
from .row_resets import Notices



class RuleHost(Protocol):
    """What a rule may use of its replica (:class:`~pyflink_tensair.core.replica.Replica` is one):
    its identity and settings, its counters, peers and model, and four verbs."""

    id: int
    replicas: int
    staleness_bound: Optional[int]
    broadcast_every: int
    guards: Guards
    peer_updates: PeerUpdates
    model: TrainableModel
    counts: ReplicaCounters
    peers: PeerLog
    steps: ModelSteps

    @property
    def serving(self) -> bool: ...

    def vet(self, message) -> Tuple[Optional[Refusal], Any]:
        """Whether a peer's (or its own) gradient message fits the model, is finite and within the norm bound."""

    def send(self, message: PeerMessage, out: List[Event]) -> None:
        """Sends ``message`` to every peer."""

    def call_model(self, method, argument) -> Any:
        """``method(argument)``, timed."""

    def apply_row_notices(self, notices: Notices, *, own: bool) -> None:
        """Resets the id tables' rows that changed hands."""


class UpdateRule(abc.ABC):
    """What differs between synchronous SGD and DASGD, for one replica (``host``)."""

    fused = False  # whether the replica's own step is the model's train_step (computed and applied in one call)

    def __init__(self, host: RuleHost):
        self.host = host

    # ------------------------------------------------------------------ own steps

    @abc.abstractmethod
    def skips(self, result: StepResult) -> bool:
        """Whether the replica's own computed step is dropped (not counted, applied nor sent)."""

    @abc.abstractmethod
    def own_step(self, result: StepResult, out: List[Event]) -> None:
        """The replica's own step ``host.counts.local_step`` is computed (``result``): apply it, send it."""

    def flush(self, out: List[Event]) -> None:
        """Sends what this replica has computed and not sent yet (nothing, by default)."""

    def on_done_sent(self) -> None:
        """This replica has sent its done marker: it contributes no more steps."""

    # ------------------------------------------------------------------ peers' messages

    def on_peer_notices(self, message: GradientMessage) -> None:
        """The row notices a peer's gradient message carries (before it is vetted; not a repeat):
        applied at once, before the gradient that may use the fresh rows."""
        self.host.apply_row_notices(message.notices, own=False)

    def on_peer_weights(self, message: WeightsMessage) -> None:
        """Periodic averaging: the replica's weights move ``1 / replicas`` of the way towards the
        sender's (the sender's gradients up to its step are applied already: FIFO). Not while it
        serves: a serving model stays fixed (:mod:`~.auto_mode`)."""
        host = self.host
        peer = host.peers[message.sender]
        if message.step <= peer.weights_step:
            host.counts.duplicates_dropped += 1
            return
        peer.weights_step = message.step
        if host.serving:
            host.counts.messages_while_serving += 1
            return
        host.steps.move_towards(message.weights, 1.0 / host.replicas)
        host.counts.model_version += 1
        host.counts.weights_mixed += 1

    @abc.abstractmethod
    def on_peer_gradient(self, message: GradientMessage) -> None:
        """A peer's gradient message, vetted and not a repeat."""

    @abc.abstractmethod
    def skip_peer_step(self, sender: int, first: int, last: int) -> None:
        """A peer's gradient message of steps ``first .. last`` was refused: it counts as received."""

    @abc.abstractmethod
    def on_peer_done(self, sender: int, final_step: int) -> None:
        """``sender`` is done at ``final_step`` (its ``PeerState.final`` is set): a step of it still
        missing was in a message nobody could read, and will not come."""

    @abc.abstractmethod
    def on_unattributable(self, message: RefusedMessage) -> None:
        """A peer message nobody could read nor attribute to a sender (the replica counts it and
        sets it aside after this; raise to fail instead)."""

    @abc.abstractmethod
    def is_duplicate(self, message) -> bool:
        """Whether a gradient message (or a refused one: ``sender``, ``first_step``, ``step``) is
        in this replica's state already."""

    @abc.abstractmethod
    def received_through(self, sender: int) -> int:
        """The highest step through which every message of ``sender`` is in this replica's state."""

    # ------------------------------------------------------------------ the bound

    @abc.abstractmethod
    def staleness(self) -> int:
        """How many steps this replica is ahead of what it holds of its peers."""

    @abc.abstractmethod
    def blocked(self) -> bool:
        """Whether local step ``local_step + 1`` must wait for peers."""

    @abc.abstractmethod
    def all_applied(self) -> bool:
        """Once every peer is done: whether everything there is to apply is applied."""

    # ------------------------------------------------------------------ state

    @abc.abstractmethod
    def counters(self) -> Dict[str, int]:
        """The rule's counters, by their names in the replica's snapshot."""

    @abc.abstractmethod
    def snapshot(self) -> Dict[str, np.ndarray]:
        """The rule's other state as snapshot entries (encoded records, ``uint8`` arrays)."""

    @abc.abstractmethod
    def restore(self, state: Mapping[str, np.ndarray], counters: Mapping[str, int]) -> None:
        """Resumes from a snapshot: its entries, and its counters by name (a counter it does not
        hold keeps its value)."""


def rule_for(host: RuleHost) -> UpdateRule:
    """The rule of ``host.staleness_bound``: synchronous SGD at 0, DASGD otherwise."""
    return SynchronousSGD(host) if host.staleness_bound == 0 else DASGD(host)


class SynchronousSGD(UpdateRule):
    """``s = 0``: a replica computes its step-``k`` gradient without applying it and broadcasts it;
    when the step-``k`` gradients of every replica still training are in, it applies their
    average, summed in replica order. Every replica applies the same updates in the same order, so
    replicas stay bit-identical; a refused or unreadable step is a zero in the average, everywhere
    alike. Row notices (id tables) a peer's step-``k`` message carries wait for that step too: they
    are applied just before its average, in replica order, never before an earlier step's average
    (with three replicas or more a peer's step ``k`` can arrive before this replica's step
    ``k - 1`` is complete)."""

    def __init__(self, host: RuleHost):
        super().__init__(host)
        self.completed = 0  # the last step whose averaged update is applied
        self.pending: Dict[int, Dict[int, Gradients]] = {}  # step -> replica -> its contribution
        self.notices: Dict[int, Dict[int, Notices]] = {}  # step -> replica -> the row notices its message carried

    def skips(self, result: StepResult) -> bool:
        return False  # a step that is not finite is a zero contribution instead (own_step)

    def own_step(self, result: StepResult, out: List[Event]) -> None:
        host = self.host
        step, gradients = host.counts.local_step, cast(Gradients, result.gradients)  # computed, not fused
        # peers vet the gradient as it is sent; this replica vets its own contribution alike
        # (the same check on the same values), and a step the model found not finite too
        message = GradientMessage(host.id, step, step, gradients)
        if result.finite and host.guards.max_gradient_norm is None:  # nothing a peer could refuse
            refusal, vetted = None, message
        else:
            refusal, vetted = host.vet(message)
        if refusal is None and not own_gradient_finite(result, False):
            refusal = check_norm(float("nan"), None)
        if refusal is not None:  # a zero in its place, here and (sent as such) at every peer
            host.counts.steps_skipped += 1
            message = vetted = dataclasses.replace(message, gradients=zeros_like(gradients))
        self.pending.setdefault(step, {})[host.id] = vetted.gradients
        host.send(message, out)
        self._complete_steps()

    def on_done_sent(self) -> None:
        self._complete_steps()

    def on_peer_notices(self, message: GradientMessage) -> None:
        if message.notices and message.step > self.completed:  # a repeat's notices came with its first copy
            self.notices.setdefault(message.step, {})[message.sender] = message.notices

    def on_peer_gradient(self, message: GradientMessage) -> None:
        self.pending.setdefault(message.step, {})[message.sender] = message.gradients
        self._complete_steps()

    def skip_peer_step(self, sender: int, first: int, last: int) -> None:
        self.pending.setdefault(last, {})[sender] = self._zeros()
        self._complete_steps()

    def on_peer_done(self, sender: int, final_step: int) -> None:
        for step in range(self.completed + 1, final_step + 1):
            if sender not in self.pending.get(step, {}):
                self.pending.setdefault(step, {})[sender] = self._zeros()
        self._complete_steps()

    def on_unattributable(self, message: RefusedMessage) -> None:
        raise ProtocolError(f"replica {self.host.id} received a peer message it cannot read or attribute "
                            f"({message.detail}): synchronous replicas cannot tell whose step is missing")

    def is_duplicate(self, message) -> bool:
        return message.step <= self.completed or message.sender in self.pending.get(message.step, {})

    def received_through(self, sender: int) -> int:
        step = self.completed
        while sender in self.pending.get(step + 1, {}):
            step += 1
        return step

    def staleness(self) -> int:
        return self.host.local_step - self.completed

    def blocked(self) -> bool:
        return self.completed < self.host.local_step

    def all_applied(self) -> bool:
        host = self.host
        last = max([host.counts.local_step, *(peer.final for peer in host.peers.states() if peer.final is not None)])
        return self.completed >= last

    def _complete_steps(self) -> None:
        """Applies the averaged update of every step whose contributions are all in."""
        host = self.host
        while True:
            step = self.completed + 1
            contributors = [r for r in range(host.replicas) if self._contributes(r, step)]
            pending = self.pending.get(step, {})
            if not contributors or any(r not in pending for r in contributors):
                return
            notices = self.notices.pop(step, {})
            for sender in sorted(notices):
                host.apply_row_notices(notices[sender], own=False)
            host.call_model(host.model.apply_gradients, average_gradients([pending[r] for r in contributors]))
            host.counts.model_version += 1
            host.counts.messages_applied += len(contributors) - (host.id in contributors)
            del self.pending[step]
            self.completed = step

    def _contributes(self, replica_id: int, step: int) -> bool:
        host = self.host
        if replica_id == host.id:
            return step <= host.counts.local_step or not host.counts.done_sent
        final = host.peers[replica_id].final
        return final is None or step <= final

    def _zeros(self) -> Gradients:
        return {name: np.zeros(shape, np.float32) for name, shape in self.host.steps.shapes.items()}

    def counters(self) -> Dict[str, int]:
        return {"sync_done": self.completed}

    def snapshot(self) -> Dict[str, np.ndarray]:
        return {f"sync/{step}/{sender}": _encoded(GradientMessage(sender, step, step, grads,
                                                                  notices=self.notices.get(step, {}).get(sender, {})))
                for step, contributions in self.pending.items() for sender, grads in contributions.items()}

    def restore(self, state: Mapping[str, np.ndarray], counters: Mapping[str, int]) -> None:
        self.completed = int(counters.get("sync_done", self.completed))
        self.pending, self.notices = {}, {}
        for key in sorted(k for k in state if k.startswith("sync/")):
            message = cast(GradientMessage, wire.decode_message(state[key].tobytes()))
            self.pending.setdefault(message.step, {})[message.sender] = message.gradients
            if message.notices:
                self.notices.setdefault(message.step, {})[message.sender] = message.notices


class DASGD(UpdateRule):
    """``s > 0`` or ``None`` (TensAIR's rule): a replica applies its own gradient at once, sums it
    into an outgoing message sent every ``broadcast_every`` steps, and applies each peer message
    through its own optimizer in arrival order (weighed as ``peer_updates`` say). With a bound
    ``s``, it starts local step ``k + 1`` only once it holds every live peer's gradients up to that
    peer's step ``k - s`` (a peer that serves or is done is not waited for). With
    ``average_every=K``, every K local steps it also sends its dense-gradient weights, after its
    gradients."""

    def __init__(self, host: RuleHost):
        super().__init__(host)
        self.fused = host.steps.fusable
        self.outgoing: List[Gradients] = []  # own gradients not sent yet, summed when they are
        self.outgoing_first = 1  # the local step of the first of them
        self.unattributed = 0  # peer messages nobody could read, not yet matched to a gap

    def skips(self, result: StepResult) -> bool:
        return not own_gradient_finite(result, self.fused)

    def own_step(self, result: StepResult, out: List[Event]) -> None:
        host = self.host
        gradients = cast(Gradients, result.gradients)  # None only from a fused step with no peers to send it to
        if not self.fused:
            host.call_model(host.model.apply_gradients, gradients)
        host.counts.model_version += 1
        if len(host.peers):
            if not self.outgoing:
                self.outgoing_first = host.counts.local_step
            self.outgoing.append(gradients)
            if host.counts.local_step - self.outgoing_first + 1 >= host.broadcast_every:  # steps, not entries: a restored sum is one
                self.flush(out)
            every = host.peer_updates.average_every
            if every is not None and host.counts.local_step % every == 0:
                self._send_weights(gradients, out)

    def flush(self, out: List[Event]) -> None:
        if not self.outgoing:
            return
        total = self.outgoing[0] if len(self.outgoing) == 1 else sum_gradients(self.outgoing)
        self.outgoing = []
        host = self.host
        host.send(GradientMessage(host.id, host.counts.local_step, self.outgoing_first, total), out)

    def _send_weights(self, gradients: Gradients, out: List[Event]) -> None:
        """Periodic averaging: the weights of every variable whose gradient is dense. Embedding
        tables (sparse gradients) stay out: their rows travel in the gradient messages, and a
        whole table every few steps would outweigh them many times (word2vec: 120 MB)."""
        dense = [name for name, g in gradients.items() if not isinstance(g, SparseGradient)]
        if not dense:
            return
        self.flush(out)  # every gradient in these weights travels before them
        host = self.host
        weights = host.model.get_weights()
        host.send(WeightsMessage(host.id, host.counts.local_step, {name: weights[name] for name in dense}), out)

    def on_peer_gradient(self, message: GradientMessage) -> None:
        host = self.host
        self._attribute_gap(message)
        if host.serving:  # a serving model stays fixed (core.auto_mode): received, not applied
            host.counts.messages_while_serving += 1
        else:
            apply = peer_update(host.peer_updates, local_step=host.counts.local_step, sender_step=message.step)
            host.call_model(functools.partial(apply, host.model), message.gradients)
            host.counts.model_version += 1
            host.counts.messages_applied += 1
        host.peers[message.sender].mark_applied(message.first_step, message.step)

    def _attribute_gap(self, message: GradientMessage) -> None:
        """A sender's messages arrive in order: a gap before this one, while a message nobody
        could read is unaccounted for, was that message (the bound then stops waiting for it)."""
        peer = self.host.peers[message.sender]
        if self.unattributed and message.first_step > peer.applied + 1 and peer.applied + 1 not in peer.ahead:
            self.unattributed -= 1
            peer.mark_applied(peer.applied + 1, message.first_step - 1)

    def skip_peer_step(self, sender: int, first: int, last: int) -> None:
        self.host.peers[sender].mark_applied(first, last)

    def on_peer_done(self, sender: int, final_step: int) -> None:
        self.host.peers[sender].skip_to(final_step)

    def on_unattributable(self, message: RefusedMessage) -> None:
        self.unattributed += 1

    def is_duplicate(self, message) -> bool:
        return self.host.peers[message.sender].holds(message.first_step, message.step)

    def received_through(self, sender: int) -> int:
        return self.host.peers[sender].applied

    def staleness(self) -> int:
        host = self.host
        live = [peer for peer in host.peers.states() if not peer.paused]
        if not live:
            return 0
        return max(0, host.counts.local_step - min(peer.progress() for peer in live))

    def blocked(self) -> bool:
        host = self.host
        if host.staleness_bound is None:
            return False
        need = host.counts.local_step - host.staleness_bound
        return any(peer.final is None and not peer.paused and peer.progress() < need for peer in host.peers.states())

    def all_applied(self) -> bool:
        return all(peer.final is not None and peer.applied >= peer.final for peer in self.host.peers.states())

    def counters(self) -> Dict[str, int]:
        return {"outgoing_first": self.outgoing_first, "unattributed": self.unattributed}

    def snapshot(self) -> Dict[str, np.ndarray]:
        if not self.outgoing:
            return {}
        host = self.host
        return {"outgoing": _encoded(GradientMessage(host.id, host.counts.local_step, self.outgoing_first,
                                                     sum_gradients(self.outgoing)))}

    def restore(self, state: Mapping[str, np.ndarray], counters: Mapping[str, int]) -> None:
        self.outgoing_first = int(counters.get("outgoing_first", self.outgoing_first))
        self.unattributed = int(counters.get("unattributed", self.unattributed))
        self.outgoing = [cast(GradientMessage, wire.decode_message(state["outgoing"].tobytes())).gradients] if "outgoing" in state else []


def own_gradient_finite(result: StepResult, fused: bool) -> bool:
    """Whether a replica's own step is finite (loss and gradient): as the model reports it, or
    measured (a fused step that returned no gradient leaves nothing to measure: finite)."""
    if result.finite is not None:
        return result.finite
    if result.loss is not None and not math.isfinite(result.loss):
        return False
    return (fused and result.gradients is None) or math.isfinite(gradient_norm(cast(Gradients, result.gradients)))


def zeros_like(gradients: Gradients) -> Gradients:
    """A zero gradient of the same structure (a sparse one with no rows)."""
    return {name: SparseGradient(np.zeros(0, np.int64), np.zeros((0, *g.dense_shape[1:]), np.float32), g.dense_shape)
            if isinstance(g, SparseGradient) else np.zeros(np.shape(g), np.float32) for name, g in gradients.items()}


def _encoded(message: GradientMessage) -> np.ndarray:
    return wire.as_uint8(wire.encode_message(message))
