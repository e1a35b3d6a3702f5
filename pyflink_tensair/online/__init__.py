"""The online loop: serve live events with the freshest model, learn from labels that arrive later.

::

    events ──┬──────────────────────► serve ──► predictions (key, model version, its age) ──┐
             │                          ▲ broadcast                                          ├─► score (online metrics)
             │                   TrainOutput.updates                                         │
             │                          │                                                    │
             └─► join_labels ◄─ labels  └── train ◄── text_batches ◄── joined records ◄──────┘ (labels)

- :mod:`.serving`: :func:`~.serving.serve`, inference operators that apply the updates as they arrive.
- :mod:`.labels`: :func:`~.labels.join_labels`, events joined with their late labels in keyed state.
- :mod:`.scoring`: :func:`~.scoring.score`, the served predictions scored against the labels, windowed.
- :mod:`.sql_tables`: events and labels from SQL tables (named columns), predictions as a Table.
- :mod:`.udf`: the model as a vectorized SQL function that follows a folder of model updates.
- :mod:`.synthetic`: JSON events made and paced on the JVM, for load tests.

The model updates themselves (what replica 0 publishes, what a server's view applies) are
:mod:`pyflink_tensair.core.model_updates`: plain NumPy, like the replica that publishes them.

The loop has no cycle in the dataflow: training consumes the events joined with labels, serving
consumes the events and the updates, and scoring the predictions and the labels.
"""
