"""How a DASGD replica applies a peer's gradient: as it is, or weighed down for its staleness.

:class:`~pyflink_tensair.config.PeerUpdates` holds the settings; :func:`peer_update` turns one
received gradient into the call that applies it. The replica's own gradients never pass here.

Example::

    >>> import numpy as np
    >>> from pyflink_tensair.config import PeerUpdates
    >>> from pyflink_tensair.testing import LinearModel
    >>> model = LinearModel(2, learning_rate=1.0, momentum=0.0)
    >>> before = model.get_weights()["w"].copy()
    >>> peer_update(PeerUpdates(scale=0.5), local_step=3, sender_step=3)(model, {"w": np.ones(2), "b": np.zeros(1)})
    >>> (before - model.get_weights()["w"]).tolist()
    [0.5, 0.5]
"""

from __future__ import annotations

import functools
from typing import Callable

from ..config import PeerUpdates
from ..errors import ConfigError
from .gradients import scale_gradients
from .messages import Gradients


def check_model(settings: PeerUpdates, model) -> None:
    """Raises ConfigError where ``model`` cannot apply peer gradients as ``settings`` say."""
    if settings.rule == "sgd" and not callable(getattr(model, "apply_sgd", None)):
        raise ConfigError(f"PeerUpdates(rule='sgd') needs a model with apply_sgd(gradients, learning_rate); "
                          f"{type(model).__name__} has none")


def peer_update(settings: PeerUpdates, *, local_step: int, sender_step: int) -> Callable[[object, Gradients], None]:
    """``apply(model, gradients)``: what applies a gradient the sender computed at its step
    ``sender_step`` to a replica at ``local_step``."""
    factor = settings.factor(local_step, sender_step)
    if settings.rule == "sgd":
        return lambda model, gradients: model.apply_sgd(gradients, settings.sgd_learning_rate * factor)
    if factor == 1:
        return lambda model, gradients: model.apply_gradients(gradients)
    return functools.partial(_apply_scaled, factor)


def _apply_scaled(factor: float, model, gradients: Gradients) -> None:
    model.apply_gradients(scale_gradients(gradients, factor))


def move_towards(model, weights, *, share: float) -> None:
    """Periodic averaging: ``model``'s weights move ``share`` of the way towards ``weights`` (a
    peer's, by name), each in its own dtype."""
    own = model.get_weights()
    model.set_weights({name: (own[name] + share * (peer - own[name])).astype(own[name].dtype)
                       for name, peer in weights.items()})
