"""Model builders used by the jobs, tests and benchmarks. Each returns a compiled Keras model.

A builder is a plain module-level function (optionally wrapped in ``functools.partial``), so
PyFlink can ship it to the Python workers by reference. Keras loads when a builder first runs, not
when this module is imported: a job names its model before it parses its flags, and a bad flag
should not wait for TensorFlow.
"""

from __future__ import annotations

import os


def _keras():
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras

    return keras


def quickstart_classifier(features: int = 20, classes: int = 4, hidden: int = 32,
                          learning_rate: float = 0.003) -> "keras.Model":
    """A small MLP classifier (``features`` -> ``hidden`` relu -> ``classes`` softmax), Adam."""
    keras = _keras()
    model = keras.Sequential([
        keras.Input(shape=(features,)),
        keras.layers.Dense(hidden, activation="relu", name="hidden"),
        keras.layers.Dense(classes, activation="softmax", name="dense"),
    ])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss="sparse_categorical_crossentropy")
    return model


def logistic_regression(features: int = 20, classes: int = 2, learning_rate: float = 0.05) -> "keras.Model":
    """Multinomial logistic regression (one softmax layer), plain SGD: the linear model that Flink
    ML's ``OnlineLogisticRegression`` and River's ``LogisticRegression`` train (benchmarks/ingestion.py)."""
    keras = _keras()
    model = keras.Sequential([keras.Input(shape=(features,)),
                              keras.layers.Dense(classes, activation="softmax", name="dense")])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate), loss="sparse_categorical_crossentropy")
    return model


def embedding_classifier(vocabulary: int = 10_000, dim: int = 32, length: int = 8, classes: int = 2,
                         learning_rate: float = 0.5) -> "keras.Model":
    """Bag-of-embeddings classifier; its embedding gradient is sparse (``tf.IndexedSlices``)."""
    keras = _keras()
    model = keras.Sequential([
        keras.Input(shape=(length,), dtype="int32"),
        keras.layers.Embedding(vocabulary, dim, name="embedding"),
        keras.layers.GlobalAveragePooling1D(),
        keras.layers.Dense(classes, activation="softmax", name="dense"),
    ])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate), loss="sparse_categorical_crossentropy")
    return model


def _classifier_cnn(input_shape, convolutions, *, padding: str, pool_last: bool, learning_rate: float,
                    pixels: str = "float32") -> "keras.Model":
    """Conv(3x3, relu) layers with 2x2 max-pooling between them (and after the last one if
    ``pool_last``), then Dense 64 relu and 10 logits; Adam. ``pixels="uint8"``: the input is
    raw 0-255 pixels, scaled to [0, 1] inside the model (a quarter of the bytes on the wire)."""
    keras = _keras()
    if pixels not in ("float32", "uint8"):
        raise ValueError(f"pixels must be 'float32' or 'uint8'. Received: pixels={pixels!r}")
    layers = [keras.Input(shape=input_shape, dtype=pixels)]
    if pixels == "uint8":
        layers.append(keras.layers.Rescaling(1 / 255))
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


def cifar10_cnn(learning_rate: float = 0.001, pixels: str = "float32") -> "keras.Model":
    """The reference CIFAR-10 CNN of TensAIR (Conv32-Pool-Conv64-Pool-Conv64-Dense64-Dense10):
    122,570 trainable parameters, Adam, logits out. ``pixels="uint8"`` takes 0-255 pixels and
    scales them inside the model."""
    keras = _keras()
    return _classifier_cnn((32, 32, 3), (32, 64, 64), padding="valid", pool_last=False, learning_rate=learning_rate,
                           pixels=pixels)


def digits_cnn(learning_rate: float = 0.001) -> "keras.Model":
    """The same shape of CNN sized for scikit-learn's 8x8 digits (Conv32-Pool-Conv64-Pool, padded)."""
    keras = _keras()
    return _classifier_cnn((8, 8, 1), (32, 64), padding="same", pool_last=True, learning_rate=learning_rate)


def word2vec(vocabulary: int = 50_000, dim: int = 300, negatives: int = 4,
             learning_rate: float = 256.0) -> "keras.Model":
    """Skip-gram with negative sampling, the batches of :class:`pyflink_tensair.word2vec.SkipGramBatches`.

    Inputs ``target`` (int32, shape ()) and ``context`` (int32, shape (1 + negatives,)); two
    ``vocabulary`` x ``dim`` tables, ``target_embedding`` (the word vectors to keep) and
    ``context_embedding``; output the logits ``target_vector . context_vector`` (B, 1 + negatives),
    trained with binary cross-entropy (column 0 is the true context) by plain SGD. Only built-in
    layers, so ``model.save("w.keras")`` / ``keras.models.load_model`` need no custom objects; both
    tables get sparse (``tf.IndexedSlices``) gradients.

    Both tables start uniform in +-0.5/dim. word2vec.c starts the context table at zero, but then
    the first step gives the target table a zero gradient, and every logit ties at 0, so the
    adapter's accuracy (the share of rows where the true context scores highest) reads 1.0 instead
    of chance, 1 / (1 + negatives).

    The loss is the mean over the B x (1 + negatives) logits (so it reads 0.693 at the start
    whatever the batch size), which scales each pair's step by ``1 / (B * (1 + negatives))``: the
    learning rate must grow with the batch. The default 256 is word2vec.c's 0.025 per pair at
    B = 2048 with 4 negatives (0.025 * 2048 * 5); scale it with B. On Shakespeare (B = 2048) it
    gives sensible neighbours in two passes (king: prince, duke; france: england); 1.0 leaves the
    loss at 0.693, and 1024 makes rare words' vectors noisy.

    Example::

        >>> model = word2vec(vocabulary=100, dim=8)
        >>> [tuple(v.shape) for v in model.trainable_variables]
        [(100, 8), (100, 8)]
    """
    keras = _keras()
    scale = 0.5 / dim
    target = keras.Input(shape=(), dtype="int32", name="target")
    context = keras.Input(shape=(1 + negatives,), dtype="int32", name="context")
    target_vector = keras.layers.Embedding(
        vocabulary, dim, embeddings_initializer=keras.initializers.RandomUniform(-scale, scale),
        name="target_embedding")(target)
    context_vectors = keras.layers.Embedding(
        vocabulary, dim, embeddings_initializer=keras.initializers.RandomUniform(-scale, scale),
        name="context_embedding")(context)
    logits = keras.layers.Dot(axes=(1, 2), name="logits")([target_vector, context_vectors])
    model = keras.Model({"target": target, "context": context}, logits, name="word2vec")
    model.compile(optimizer=keras.optimizers.SGD(learning_rate),
                  loss=keras.losses.BinaryCrossentropy(from_logits=True))
    return model


def click_model(users: int = 10_001, items: int = 10_001, dim: int = 16, hidden: int = 32,
                learning_rate: float = 0.01) -> "keras.Model":
    """A click model over two id tables: inputs ``user`` and ``item`` (int32 rows, shape ()),
    tables ``user_embedding`` (``users`` x ``dim``) and ``item_embedding``, their vectors and
    their product through a ``hidden``-unit layer to the click probability; binary
    cross-entropy, Adam (so a reset row's optimizer slots matter). The rows come from id tables
    (:class:`pyflink_tensair.embeddings.IdTable`, row 0 for ids without a row); both tables get
    sparse gradients.

    Example::

        >>> model = click_model(users=50, items=30, dim=4, hidden=8)
        >>> [tuple(v.shape) for v in model.trainable_variables][:2]
        [(50, 4), (30, 4)]
    """
    keras = _keras()
    user = keras.Input(shape=(), dtype="int32", name="user")
    item = keras.Input(shape=(), dtype="int32", name="item")
    u = keras.layers.Embedding(users, dim, name="user_embedding")(user)
    v = keras.layers.Embedding(items, dim, name="item_embedding")(item)
    joined = keras.layers.Concatenate(name="joined")([u, v, keras.layers.Multiply(name="interaction")([u, v])])
    h = keras.layers.Dense(hidden, activation="relu", name="hidden")(joined)
    out = keras.layers.Dense(1, activation="sigmoid", name="click")(h)
    model = keras.Model({"user": user, "item": item}, out, name="click_model")
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss="binary_crossentropy")
    return model
