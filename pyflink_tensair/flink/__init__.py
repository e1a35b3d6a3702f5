"""The Flink glue: operator functions, routing, environment settings and ``train()``."""

from .batching import to_batches
from .train import TrainOutput, train
from .types import decode_final_model, decode_prediction

__all__ = ["TrainOutput", "decode_final_model", "decode_prediction", "to_batches", "train"]
