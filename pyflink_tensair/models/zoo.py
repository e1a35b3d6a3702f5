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


def _classifier_cnn(input_shape, convolutions, *, padding: str, pool_last: bool, learning_rate: float) -> "keras.Model":
    """Conv(3x3, relu) layers with 2x2 max-pooling between them (and after the last one if
    ``pool_last``), then Dense 64 relu and 10 logits; Adam."""
    layers = [keras.Input(shape=input_shape)]
    for i, filters in enumerate(convolutions):
        if i:
            layers.append(keras.layers.MaxPooling2D())
        layers.append(keras.layers.Conv2D(filters, 3, activation="relu", padding=padding))
    if pool_last:
        layers.append(keras.layers.MaxPooling2D())
    layers += [keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)]
    model = keras.Sequential(layers)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def cifar10_cnn(learning_rate: float = 0.001) -> "keras.Model":
    """The reference CIFAR-10 CNN of TensAIR (Conv32-Pool-Conv64-Pool-Conv64-Dense64-Dense10):
    122,570 trainable parameters, Adam, logits out."""
    return _classifier_cnn((32, 32, 3), (32, 64, 64), padding="valid", pool_last=False, learning_rate=learning_rate)


def digits_cnn(learning_rate: float = 0.001) -> "keras.Model":
    """The same shape of CNN sized for scikit-learn's 8x8 digits (Conv32-Pool-Conv64-Pool, padded)."""
    return _classifier_cnn((8, 8, 1), (32, 64), padding="same", pool_last=True, learning_rate=learning_rate)
