"""Models: the Keras adapter (TensorFlow imported here only) and the builders of the jobs."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
