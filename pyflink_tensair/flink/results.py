"""Getting a job's results back: the trained Keras models from the ``models`` stream.

Example::

    out = train(batches, model=zoo.quickstart_classifier, config=TrainConfig(replicas=2))
    records = list(out.models.execute_and_collect())
    models = keras_models(records, zoo.quickstart_classifier)
    models[0].predict(x)
    averaged_keras_model(records, zoo.quickstart_classifier).predict(x)  # one model for all replicas
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import List, Union

from ..core.events import FinalModel
from ..core.gradients import average_weights
from ..errors import ConfigError, ModelError
from .types import decode_final_model


_BYTES = (bytes, bytearray, memoryview)
_RECORD = (*_BYTES, list)  # a record as a sink or execute_and_collect() hands it over (Java bytes: a list)


def _decoded(records: Iterable[Union[FinalModel, bytes]]) -> List[FinalModel]:
    if isinstance(records, (FinalModel, str, *_BYTES)) or not isinstance(records, Iterable):
        raise ConfigError("records must be the records of train(...).models (a list, or execute_and_collect()'s "
                          f"iterator). Received: records={records!r:.100}")
    finals = [r if isinstance(r, FinalModel) else decode_final_model(r) for r in records]
    return sorted(finals, key=lambda f: f.replica)


def keras_model(final: Union[FinalModel, bytes], model):
    """A ``keras.Model`` built from ``model`` (what ``train`` got: a builder or a ``.keras`` path)
    holding the weights of ``final``, a record of ``train(...).models`` (or its decoded
    :class:`~pyflink_tensair.core.events.FinalModel`). The optimizer starts afresh."""
    from ..models import check_model_argument

    check_model_argument(model)
    if not isinstance(final, (FinalModel, *_RECORD)):
        raise ConfigError("final must be a record of train(...).models or a FinalModel. "
                          f"Received: final={final!r:.100}")
    if not isinstance(final, FinalModel):
        final = decode_final_model(final)
    from ..models.keras_adapter import KerasModelAdapter, load_model

    built = load_model(model)
    KerasModelAdapter(built).set_weights(final.weights)
    return built


def keras_models(records: Iterable[Union[FinalModel, bytes]], model) -> List:
    """:func:`keras_model` of each record, in replica order."""
    from ..models import check_model_argument

    check_model_argument(model)
    return [keras_model(f, model) for f in _decoded(records)]


def averaged_final_model(records: Iterable[Union[FinalModel, bytes]]) -> FinalModel:
    """One :class:`FinalModel` whose weights are the mean of every replica's final weights
    (``replica`` -1, ``model_version`` the highest): the model to keep from DASGD replicas,
    whose weights differ a little (synchronous replicas are equal, and so is their mean)."""
    finals = _decoded(records)
    if not finals:
        raise ModelError("no final model to average: the job returned none")
    return FinalModel(-1, max(f.model_version for f in finals), average_weights([f.weights for f in finals]),
                      finals[0].initial_digest, finals[0].id_maps)


def averaged_keras_model(records: Iterable[Union[FinalModel, bytes]], model):
    """:func:`keras_model` of :func:`averaged_final_model`."""
    from ..models import check_model_argument

    check_model_argument(model)
    return keras_model(averaged_final_model(records), model)
