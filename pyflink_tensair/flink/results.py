"""Getting a job's results back: the trained Keras models from the ``models`` stream.

Example::

    out = train(batches, model=zoo.quickstart_classifier, config=TrainConfig(replicas=2))
    models = keras_models(out.models.execute_and_collect(), zoo.quickstart_classifier)
    models[0].predict(x)
"""

from __future__ import annotations

from typing import Iterable, List, Union

from ..core.events import FinalModel
from .types import decode_final_model


def keras_model(final: Union[FinalModel, bytes], model):
    """A ``keras.Model`` built from ``model`` (what ``train`` got: a builder or a ``.keras`` path)
    holding the weights of ``final``, a record of ``train(...).models`` (or its decoded
    :class:`~pyflink_tensair.core.events.FinalModel`). The optimizer starts afresh."""
    from ..models.keras_adapter import KerasModelAdapter, load_model

    if not isinstance(final, FinalModel):
        final = decode_final_model(final)
    built = load_model(model)
    KerasModelAdapter(built).set_weights(final.weights)
    return built


def keras_models(records: Iterable[Union[FinalModel, bytes]], model) -> List:
    """:func:`keras_model` of each record, in replica order."""
    finals = [r if isinstance(r, FinalModel) else decode_final_model(r) for r in records]
    return [keras_model(f, model) for f in sorted(finals, key=lambda f: f.replica)]
