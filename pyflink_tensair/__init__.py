"""pyflink_tensair: Keras model replicas trained inside a PyFlink job, exchanging gradients (DASGD).

What a pipeline composes with: :func:`to_batches` (records to mini-batches) or
:func:`batch_source` (batch ``i`` made from its number, optionally paced), :func:`train` with a
:class:`TrainConfig`, and :func:`keras_models` to get the trained models back;
:func:`simulate` runs the same replicas in one process, without Flink. Errors are
:class:`TensairError` subclasses.

Example::

    from pyflink_tensair import TrainConfig, keras_models, train
    out = train(batches, model=build_model, config=TrainConfig(replicas=2))
    out.predictions   # DataStream of predictions, one record per input batch
    out.metrics       # DataStream of per-replica metrics (JSON strings)
    models = keras_models(out.models.execute_and_collect(), build_model)
"""

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

__version__ = "0.2.0"

# Every name loads on first use: importing a package must not import its subpackages (see _lazy).
_NAMES = {
    "AutoSettings": ".config", "Checkpoints": ".config", "Exports": ".config", "Guards": ".config",
    "LatencySettings": ".config", "Mode": ".config", "ModelUpdates": ".config", "PeerUpdates": ".config",
    "ServeConfig": ".config", "JoinConfig": ".config", "ScoreConfig": ".config", "serve": ".online.serving", "ServeOutput": ".online.serving", "json_event": ".online.serving",
    "join_labels": ".online.labels", "JoinOutput": ".online.labels",
    "score": ".online.scoring", "ScoreOutput": ".online.scoring",
    "PythonIn": ".config", "TrainConfig": ".config",
    "Batch": ".core.messages", "DeadLetter": ".core.messages", "decode_dead_letter": ".core.wire", "encode_batch": ".core.wire", "decode_batch": ".core.wire",
    "simulate": ".core.simulation", "SimulationResult": ".core.simulation",
    "ConfigError": ".errors", "DataError": ".errors", "DataNotFoundError": ".errors",
    "JavaToolchainError": ".errors", "ClusterError": ".errors", "ModelError": ".errors", "ProtocolError": ".errors", "TensairError": ".errors",
    "WireFormatError": ".errors", "BadInputError": ".errors",
    "train": ".flink.training", "TrainOutput": ".flink.training", "to_batches": ".flink.batching",
    "text_batches": ".flink.batching", "batches_from_table": ".flink.table_batches", "KafkaError": ".errors",
    "batch_source": ".flink.sources", "keras_model": ".flink.results", "keras_models": ".flink.results",
    "averaged_keras_model": ".flink.results",
    "decode_prediction": ".flink.types", "decode_final_model": ".flink.types",
}

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use
    from .config import (AutoSettings, Checkpoints, Exports, Guards, JoinConfig, LatencySettings, Mode, ModelUpdates,
                         PeerUpdates, PythonIn, ScoreConfig, ServeConfig, TrainConfig)
    from .core.messages import Batch, DeadLetter
    from .core.simulation import SimulationResult, simulate
    from .core.wire import decode_batch, decode_dead_letter, encode_batch
    from .errors import (BadInputError, ClusterError, ConfigError, DataError, DataNotFoundError,
                         JavaToolchainError, KafkaError, ModelError, ProtocolError, TensairError,
                         WireFormatError)
    from .flink.batching import text_batches, to_batches
    from .flink.table_batches import batches_from_table
    from .flink.results import averaged_keras_model, keras_model, keras_models
    from .flink.sources import batch_source
    from .flink.training import TrainOutput, train
    from .flink.types import decode_final_model, decode_prediction
    from .online.labels import JoinOutput, join_labels
    from .online.scoring import ScoreOutput, score
    from .online.serving import ServeOutput, json_event, serve

__getattr__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
