"""One probe: one system trains on a workload's batches arriving at a fixed rate; metrics to files.

    python benchmarks/throughput/probe_job.py --system dasgd --workload dense --replicas 2 --rate 8 --batches 160 --outdir DIR
    flink run -py benchmarks/throughput/probe_job.py --system flinkml ...

``--system limit`` runs no Flink: the same compiled train step (``train_step``, as a replica without
peers runs it) in a plain Python loop over the same encoded batches, as fast as it goes (it writes the same metrics records, without delays).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
# Run as a script (also by flink run -py): import `benchmarks` from the repository root, and not
# this folder's modules as top-level ones (they would shadow the standard library's).
sys.path[:] = [ROOT] + [p for p in sys.path if os.path.abspath(p or ".") not in (HERE, ROOT)]

OURS = ("dasgd", "bounded", "sync")
FLINKML = {"flinkml": "changed", "flinkml_full": "model"}  # system -> what its updater broadcasts
SYSTEMS = list(OURS) + list(FLINKML) + ["single", "limit"]


PYTHON_IN = ["jvm", "processes"]  # TrainConfig.python_in values a probe takes ("client" is the jobs' debugging aid)


def _or_none(parse):
    """An argparse ``type``: ``none`` is ``None`` (as on the jobs' command lines), else ``parse(text)``."""

    def value(text: str):
        return None if text.strip().lower() == "none" else parse(text)

    value.__name__ = parse.__name__
    return value


def build_parser() -> argparse.ArgumentParser:
    """The probe's flags; those of a ``TrainConfig`` field are spelled as the jobs' flag of that
    field (``--python-in``, ``--checkpoints-interval-s``, ``--peer-updates-average-every``, ...)."""
    from benchmarks.throughput.workloads import NAMES
    from pyflink_tensair.config import SPARSE_VALUES, STATE_BACKENDS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--system", choices=SYSTEMS, required=True)
    parser.add_argument("--workload", choices=NAMES, required=True)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--batches", type=int, required=True)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--pixels", choices=["float32", "uint8"], default="uint8", help="how dense images travel")
    parser.add_argument("--staleness-bound", type=int, default=4, help="the staleness bound of --system bounded")
    parser.add_argument("--tf-intra-op-threads", type=int, default=1,
                        help="TrainConfig.tf_intra_op_threads of every system (default: 1)")
    parser.add_argument("--trainer-thread", action=argparse.BooleanOptionalAction, default=True,
                        help="TrainConfig.trainer_thread of our systems (default: a trainer thread)")
    parser.add_argument("--python-in", choices=PYTHON_IN, default="jvm",
                        help="TrainConfig.python_in of every system's training operators (default: jvm)")
    parser.add_argument("--source-python-in", choices=PYTHON_IN, default="jvm",
                        help="where the batch source's make_batch runs: the python_in of the config "
                             "batch_source gets (default: jvm)")
    parser.add_argument("--outdir", required=True)
    parser.add_argument("--barrier", metavar="DIR", help="--system limit: start the loop once --processes "
                                                        "processes have written a file into DIR (so they overlap)")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--checkpoints-interval-s", type=_or_none(float), default=None, metavar="FLOAT",
                        help="our systems: Checkpoints.interval_s (default none: no checkpoints)")
    parser.add_argument("--checkpoints-dir", help="Checkpoints.dir (default: <outdir>/checkpoints)")
    parser.add_argument("--sparse-values", choices=SPARSE_VALUES, default="float32", help="TrainConfig.sparse_values")
    parser.add_argument("--broadcast-every", type=int, default=1,
                        help="TrainConfig.broadcast_every of our systems: local steps summed into one message "
                             "(TensAIR's batching of gradients; 1 with --system sync)")
    parser.add_argument("--checkpoints-state-backend", choices=STATE_BACKENDS, default="hashmap",
                        help="Checkpoints.state_backend (default: hashmap)")
    parser.add_argument("--peer-updates-average-every", type=_or_none(int), default=None, metavar="INT",
                        help="our DASGD systems: PeerUpdates.average_every (default none: never, TensAIR's rule)")
    parser.add_argument("--unfused-step", action="store_true",
                        help="replicas (and the plain loop) compute, then apply, in two calls, as before the fused "
                             "train_step (local runs only: it is set in this process's environment)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a Flink setting for the job's environment (repeatable), e.g. python.fn-execution.memory.managed=false")
    return parser


def parse_args(argv):
    from pyflink_tensair.cli.flags import parse_job_arguments

    return parse_job_arguments(build_parser(), argv)  # a mistyped flag: usage, exit status 2


def plain_loop(workload, args) -> None:
    from pyflink_tensair.core import wire
    from pyflink_tensair.core.events import Metrics
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, configure_tensorflow_threads, load_model

    configure_tensorflow_threads(args.tf_intra_op_threads)
    model = KerasModelAdapter(load_model(workload.model, seed=0))
    encoded = [wire.encode_batch(workload.make_batch(i)) for i in range(args.batches)]
    warm_up = wire.decode_batch(encoded[0])

    def train(batch):  # a lone replica's step: fused where the adapter offers it
        if callable(model.train_step):
            return model.train_step(batch, return_gradients=False)
        result = model.compute_gradients(batch)
        model.apply_gradients(result.gradients)
        return result

    train(warm_up)  # compiled before the loops start
    if args.barrier:
        wait_for_peers(args.barrier, args.processes)
    with open(os.path.join(args.outdir, "metrics-0.jsonl"), "w") as out:
        for step, data in enumerate(encoded, 1):
            batch = wire.decode_batch(data)
            result = train(batch)
            out.write(Metrics(replica=0, phase="batch", time=time.time(), local_step=step, model_version=step,
                              loss=result.loss, accuracy=result.accuracy, staleness=0, batches_per_s=0.0,
                              held_batches=0, batch_id=batch.id).to_json() + "\n")


def wait_for_peers(folder: str, processes: int, timeout_s: float = 300.0) -> None:
    """Marks this process ready in ``folder`` and waits until ``processes`` are."""
    open(os.path.join(folder, f"ready-{os.getpid()}"), "w").close()
    deadline = time.time() + timeout_s
    while len(os.listdir(folder)) < processes:
        if time.time() > deadline:
            raise RuntimeError(f"only {len(os.listdir(folder))} of {processes} plain loops got ready in {timeout_s} s")
        time.sleep(0.005)


def main(argv=None):
    args = parse_args(argv if argv is not None else sys.argv[1:])
    os.makedirs(args.outdir, exist_ok=True)
    if args.unfused_step:  # read by every KerasModelAdapter of this process and of its mini-cluster
        from pyflink_tensair.models.keras_adapter import FUSED_STEP_VARIABLE

        os.environ[FUSED_STEP_VARIABLE] = "0"
    from benchmarks.throughput import workloads

    workload = workloads.get(args.workload, args.batch_size, args.pixels)
    if args.system == "limit":
        return plain_loop(workload, args)

    import cloudpickle
    from pyflink.datastream import StreamExecutionEnvironment

    import benchmarks.throughput.flinkml_protocol
    import benchmarks.throughput.graphs
    from pyflink_tensair import Checkpoints, PeerUpdates, TrainConfig, train
    from pyflink_tensair.flink.sinks import write_json_lines
    from pyflink_tensair.flink.sources import batch_source

    for module in (workloads, benchmarks.throughput.graphs, benchmarks.throughput.flinkml_protocol):
        cloudpickle.register_pickle_by_value(module)  # the Python workers need not see this folder
    env = StreamExecutionEnvironment.get_execution_environment()
    from pyflink_tensair.flink.environment import env_configuration

    for option in args.option:
        key, _, value = option.partition("=")
        env_configuration(env).set_string(key, value)
    held = max(256, args.batches)  # open loop: a waiting replica holds what arrives (the backlog is the measure)
    staleness = {"bounded": args.staleness_bound, "sync": 0}.get(args.system)  # dasgd and the baselines: None
    checkpoints = None if args.checkpoints_interval_s is None else Checkpoints(
        interval_s=args.checkpoints_interval_s, state_backend=args.checkpoints_state_backend,
        dir=args.checkpoints_dir or os.path.join(os.path.abspath(args.outdir), "checkpoints"))
    config = TrainConfig(replicas=args.replicas, staleness_bound=staleness, tf_intra_op_threads=args.tf_intra_op_threads,
                         buffer_capacity=held, trainer_thread=args.trainer_thread, name="bench",
                         python_in=args.python_in, checkpoints=checkpoints,
                         sparse_values=args.sparse_values, broadcast_every=args.broadcast_every,
                         # explicit: not the library's default
                         peer_updates=PeerUpdates(average_every=args.peer_updates_average_every))
    batches = batch_source(env, args.batches, workload.make_batch, rate=args.rate, name="bench",
                           python_in=args.source_python_in)
    if args.system in OURS:
        metrics = train(batches, model=workload.model, config=config, check_model=False).metrics
    elif args.system in FLINKML:
        metrics = benchmarks.throughput.graphs.flinkml(batches, model=workload.model, config=config,
                                                       broadcast=FLINKML[args.system])
    else:
        metrics = benchmarks.throughput.graphs.single(batches, model=workload.model, config=config)
    write_json_lines(metrics, args.outdir, "metrics", name="bench").set_parallelism(1)
    env.execute(f"bench {args.system} {args.workload} x{args.replicas} at {args.rate:g}/s")


if __name__ == "__main__":
    main()
