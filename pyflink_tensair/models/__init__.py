"""Models: the Keras adapter (TensorFlow imported here only) and the builders of the jobs."""
