"""Model builders used by the jobs, tests and benchmarks. Each returns a compiled Keras model.

A builder is a plain module-level function (optionally wrapped in ``functools.partial``), so
PyFlink can ship it to the Python workers by reference.
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402


def quickstart_classifier(features: int = 20, classes: int = 4, hidden: int = 32,
                          learning_rate: float = 0.003) -> "keras.Model":
    """A small MLP classifier (``features`` -> ``hidden`` relu -> ``classes`` softmax), Adam."""
    model = keras.Sequential([
        keras.Input(shape=(features,)),
        keras.layers.Dense(hidden, activation="relu", name="hidden"),
        keras.layers.Dense(classes, activation="softmax", name="dense"),
    ])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss="sparse_categorical_crossentropy")
    return model


def embedding_classifier(vocabulary: int = 10_000, dim: int = 32, length: int = 8, classes: int = 2,
                         learning_rate: float = 0.5) -> "keras.Model":
    """Bag-of-embeddings classifier; its embedding gradient is sparse (``tf.IndexedSlices``)."""
    model = keras.Sequential([
        keras.Input(shape=(length,), dtype="int32"),
        keras.layers.Embedding(vocabulary, dim, name="embedding"),
        keras.layers.GlobalAveragePooling1D(),
        keras.layers.Dense(classes, activation="softmax", name="dense"),
    ])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate), loss="sparse_categorical_crossentropy")
    return model
