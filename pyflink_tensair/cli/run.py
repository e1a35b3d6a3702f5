"""Runs a job built with :func:`~pyflink_tensair.train`: result files, progress, the summary.

A job builds its batches stream, calls ``train``, then hands the output to :func:`run_job`, which
writes metrics and final models under ``--outdir``, starts the job, prints a progress line every
few seconds from those files, and returns (and writes, with ``--summary``) the summary.

Example (a job's ``__main__``)::

    if __name__ == "__main__":
        main_guard(main)      # a TensairError becomes one line on stderr and exit code 2
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time
from typing import Callable, Optional

from ..config import TrainConfig
from ..core.summary import summarize
from ..errors import ModelError
from ..flink.results import averaged_final_model, keras_model
from ..flink.types import decode_final_model
from ..flink.sinks import write_json_lines, write_records
from .flags import default_outdir
from .progress import Progress, show_probe as default_show_probe

_RESULT_FILES = ("metrics-*.jsonl", "probes-*.jsonl", "predictions-*.jsonl", "mode-changes-*.jsonl",
                 "dead-letters-*.jsonl", "model-*.bin")
_SHOWN = ("batches", "final_loss", "window_accuracy", "holdout_accuracy", "holdout_accuracy_averaged", "batches_per_s",
          "mean_gradient_message_bytes", "replica_max_weight_diff", "model_versions", "dead_letters",
          "messages_rejected")


def evaluate_models(models, model, batches, suffix: str = "") -> dict:
    """Mean loss and accuracy of each final model on held-out ``batches``, averaged over replicas
    (keys ``holdout_loss<suffix>``, ``holdout_accuracy<suffix>``)."""
    from ..models.keras_adapter import KerasModelAdapter, load_model

    if not models:
        return {}
    adapter = KerasModelAdapter(load_model(model))
    losses, accuracies = [], []
    for final in models:
        adapter.set_weights(final.weights)
        results = [adapter.evaluate(b) for b in batches]
        losses.append(sum(r.loss for r in results) / len(results))
        if all(r.accuracy is not None for r in results):
            accuracies.append(sum(r.accuracy for r in results) / len(results))
    return {f"holdout_loss{suffix}": sum(losses) / len(losses),
            f"holdout_accuracy{suffix}": sum(accuracies) / len(accuracies) if accuracies else None,
            "holdout_batches": len(batches)}


def save_final_model(models, model, path: str) -> None:
    """Saves replica 0's final weights in ``model``'s architecture as a ``.keras`` file.

    The optimizer's state is not carried over: a run continued from the file (``--model PATH``)
    starts its optimizer afresh. A model with id tables has its maps written beside it
    (``x.ids.json``, :func:`pyflink_tensair.embeddings.id_maps` reads them), as exports do.
    """
    from ..embeddings.maps import ids_path, write_id_maps

    if not models:
        raise ModelError("no final model came back from the job: nothing to save")
    final = min(models, key=lambda m: m.replica)
    trained = keras_model(final, model)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    trained.save(path)
    if getattr(final, "id_maps", None):
        write_id_maps(ids_path(path), final.id_maps)
    elif os.path.exists(ids_path(path)):  # a previous model's maps would not fit this one
        os.remove(ids_path(path))


def _attached(env) -> bool:
    from ..flink.environment import env_configuration

    return env_configuration(env).get_string("execution.attached", "true").lower() != "false"


def _attach_writers(output, outdir: str, config: TrainConfig, predictions) -> None:
    for pattern in _RESULT_FILES:
        for stale in glob.glob(os.path.join(outdir, pattern)):
            os.remove(stale)  # the writers append: results of an earlier run must not mix in
    write_json_lines(output.metrics, outdir, "metrics", name=config.name, delivery="at_least_once").set_parallelism(config.replicas)
    write_json_lines(output.probes, outdir, "probes", name=config.name, delivery="at_least_once").set_parallelism(config.replicas)
    write_json_lines(output.mode_changes, outdir, "mode-changes", name=config.name, delivery="at_least_once").set_parallelism(config.replicas)
    write_json_lines(output.dead_letters, outdir, "dead-letters", name=config.name).set_parallelism(config.replicas)
    write_records(output.models, outdir, "model", name=config.name).set_parallelism(config.replicas)
    if predictions is not None:
        write_json_lines(predictions, outdir, "predictions", name=config.name).set_parallelism(config.replicas)


def run_job(env, output, args, *, job_name: str, config: TrainConfig, total_batches: Optional[int],
            model=None, extra_summary: Optional[dict] = None, holdout=None, predictions=None,
            show_probe: Callable[[dict], str] = default_show_probe,
            finish: Optional[Callable[[dict, list, list, list], dict]] = None, score_prefixes=()) -> dict:
    """Attaches the result writers, runs the job with progress lines, returns (and writes) the summary.

    Args:
        output: what :func:`~pyflink_tensair.train` returned.
        args: the parsed flags of :func:`~.flags.add_job_arguments`.
        model: the model ``train`` got; needed for ``--save`` and ``holdout``.
        holdout: optional list of batches each final model is scored on.
        predictions: optional stream of JSON strings written to ``<outdir>/predictions-*.jsonl``.
        show_probe: formats a probe record for the progress output.
        finish: ``finish(summary, metrics, models, probes) -> dict`` adds job-specific figures.
        score_prefixes: files of ``score()``'s window reports to follow (progress line, TensorBoard).
    """
    outdir = os.path.abspath(args.outdir or default_outdir(job_name))
    os.makedirs(outdir, exist_ok=True)
    _attach_writers(output, outdir, config, predictions)
    print(f"{job_name}: {config.replicas} replica(s), staleness bound {config.staleness_bound}, "
          f"{total_batches or 'all'} batches; results in {outdir}", flush=True)
    progress = Progress(outdir, total=total_batches, window=args.score_window, logdir=args.logdir,
                        show_probe=show_probe, score_prefixes=score_prefixes)
    start = time.time()
    client = env.execute_async(job_name)
    if not _attached(env):  # flink run -d: the job runs on; nothing to follow from here
        print(f"submitted detached as job {client.get_job_id()}; metrics and models will be in {outdir}", flush=True)
        return {"job": job_name, "job_id": str(client.get_job_id()), "outdir": outdir, "detached": True}

    # A local mini-cluster shuts down with its job, so wait on the result, not on the status.
    result = client.get_job_execution_result()
    next_line = start + args.progress_every
    while not result.done():
        time.sleep(0.2)
        progress.poll()
        if time.time() >= next_line:
            print(progress.line(time.time() - start), flush=True)
            next_line = time.time() + args.progress_every
    wall = time.time() - start
    try:
        result.result()  # raises the job's failure, if it failed
    finally:
        progress.poll()
        progress.close()
    models = [decode_final_model(open(p, "rb").read()) for p in sorted(glob.glob(os.path.join(outdir, "model-*.bin")))]
    metrics = progress.metrics.records
    summary = summarize(metrics, models, config, wall, args.score_window)
    summary.update({"job": job_name, "batch_size": args.batch_size, "seed": args.seed, "rate": args.rate,
                    "outdir": outdir, "logdir": os.path.abspath(args.logdir) if args.logdir else None,
                    "latency": None if config.latency is None else vars(config.latency),
                    **(extra_summary or {})})
    if holdout is not None:
        summary.update(evaluate_models(models, model, holdout))
        if len(models) > 1:  # the replicas' mean as one model
            summary.update(evaluate_models([averaged_final_model(models)], model, holdout, suffix="_averaged"))
    if finish is not None:
        summary.update(finish(summary, metrics, models, progress.probes.records))
    if config.exports is not None:
        from ..models.export import exported_models, latest_export

        exports = exported_models(config.exports.dir)
        summary.update(exports=len(exports), latest_export=latest_export(config.exports.dir))
    if args.save:
        save_final_model(models, model, args.save)
        summary["saved_model"] = os.path.abspath(args.save)
        print(f"replica 0's final model saved to {args.save}", flush=True)
    print(progress.line(wall), flush=True)
    print(json.dumps({k: summary.get(k) for k in _SHOWN}), flush=True)
    if args.summary:
        os.makedirs(os.path.dirname(os.path.abspath(args.summary)), exist_ok=True)
        with open(args.summary, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
        print(f"summary written to {args.summary}", flush=True)
    return summary


def main_guard(fn) -> None:
    """Runs a job's ``main(argv)`` and turns a TensairError into a one-line message and exit code 2."""
    from ..errors import TensairError

    try:
        fn(sys.argv[1:])
    except TensairError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
