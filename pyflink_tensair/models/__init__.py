"""Models: the Keras adapter (TensorFlow imported here only) and the builders of the jobs."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def check_model_argument(model) -> None:
    """Checks, without building anything (or importing TensorFlow), that ``model`` can name a model:
    a builder function or the path of a ``.keras`` file. Raises ModelError.

        >>> check_model_argument(42)
        Traceback (most recent call last):
        ...
        pyflink_tensair.errors.ModelError: model must be a function returning a compiled keras.Model, or a path to a .keras file. Received: model=42
    """
    from ..errors import ModelError

    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not path.endswith(".keras"):
            raise ModelError(f"model must be a builder function or a path to a .keras file. Received: model={path!r}")
        if not os.path.isfile(path):
            raise ModelError(f"model file {path!r} does not exist")
    elif not callable(model):
        raise ModelError(
            "model must be a function returning a compiled keras.Model, or a path to a .keras file. "
            f"Received: model={model!r}")
