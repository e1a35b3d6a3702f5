"""The throughput benchmark: its verdict, its search, the Flink ML baseline's protocol, the report,
and `python -m benchmarks run --quick` end to end (what CI runs); the other benchmarks' pure parts
and the runner of jobs they share."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from benchmarks.throughput import report, search, verdict
from benchmarks.throughput.flinkml_protocol import ModelUpdate, Updater, UpdaterDone, Worker, WorkerDone
from pyflink_tensair.core.gradients import average_gradients
from pyflink_tensair.testing import LinearModel, make_regression_batches

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_delays_that_keep_growing_are_not_sustainable():
    schedule = [i * 0.1 for i in range(300)]
    assert verdict.judge([(t, 0.05) for t in schedule], expected=300).sustainable
    growing = verdict.judge([(t, 0.1 * t) for t in schedule], expected=300)
    assert not growing.sustainable and "grows" in growing.reason and growing.slope == pytest.approx(0.1, abs=1e-6)
    # a start-up backlog being worked off is sustainable; one that stays is not
    assert verdict.judge([(t, max(0.05, 5 - 0.5 * t)) for t in schedule], expected=300).sustainable
    stuck = verdict.judge([(t, 4.0) for t in schedule], expected=300)
    assert not stuck.sustainable and "not falling" in stuck.reason


def test_missing_batches_fail_the_verdict():
    result = verdict.judge([(i * 0.1, 0.01) for i in range(50)], expected=60)
    assert not result.sustainable and result.reason == "only 50 of 60 batches were trained"


def test_search_halves_down_when_the_first_rate_fails():
    probes = search.search(lambda rate: rate <= 3, start=16, bisections=1)
    assert [(p.rate, p.sustainable) for p in probes] == [(16, False), (8, False), (4, False), (2, True), (3.0, True)]
    assert search.best_rate(probes) == 3.0
    assert search.best_rate(search.search(lambda rate: False, start=1, min_rate=0.5)) is None


def test_the_kafka_rate_search_finds_the_rate_a_paced_consumer_keeps_up_with():
    # a side that trains 1,000 records/s: behind a faster schedule each batch's delay grows
    from benchmarks.kafka_throughput import sustainable_rate

    def run(rate, capacity=1000.0, batches=200):
        gap = 16 / rate
        return {"delays": [(i * gap, max(0.0, i * (16 / capacity - gap))) for i in range(batches)]}

    found = sustainable_rate(run, 200, start=400, bisections=3)
    assert 800 < found["records_per_s"] <= 1000
    assert [p["sustainable"] for p in found["probes"][:3]] == [True, True, False]


def test_flinkml_pattern_is_synchronous_sgd_on_the_average_gradient():
    """Two workers and the updater, messages routed by hand, reproduce a plain loop that applies
    the average of each pair of batches' gradients."""
    batches = make_regression_batches(8, 3, seed=1)
    workers = [Worker(i, LinearModel(3, seed=0)) for i in range(2)]
    updater = Updater(2, LinearModel(3, seed=0))
    metrics, to_updater = [], []

    def route(events):
        for e in events:
            if type(e).__name__ == "Metrics":
                metrics.append(e)
            else:
                to_updater.append(e)

    for i, batch in enumerate(batches):
        route(workers[i % 2].on_batch(batch))
    for w in workers:
        route(w.on_input_end())
    finished = False
    while to_updater:
        message = to_updater.pop(0)
        out = updater.on_done(message) if isinstance(message, WorkerDone) else updater.on_gradient(message)
        for event in out:
            if isinstance(event, ModelUpdate):
                for w in workers:
                    route(w.on_model(event))
            elif isinstance(event, UpdaterDone):
                finished = True
    assert finished and updater.version == 4 and sorted(m.batch_id for m in metrics) == list(range(8))
    reference = LinearModel(3, seed=0)
    for step in range(4):
        pair = [reference.compute_gradients(batches[2 * step + r]).gradients for r in range(2)]
        reference.apply_gradients(average_gradients(pair))
    for w in workers + [updater]:
        for name, value in reference.get_weights().items():
            np.testing.assert_allclose(w.model.get_weights()[name], value, atol=1e-12)


def test_updater_refuses_a_gradient_of_an_old_model():
    updater = Updater(1, LinearModel(3))
    from benchmarks.throughput.flinkml_protocol import GradientUpdate

    with pytest.raises(RuntimeError, match="version 3"):
        updater.on_gradient(GradientUpdate(0, 3, {}))


def test_the_faithful_updater_broadcasts_the_whole_model_and_the_variant_only_changed_rows():
    from benchmarks.throughput.flinkml_protocol import GradientUpdate
    from pyflink_tensair.core.messages import SparseGradient

    gradients = {"w": SparseGradient(np.array([1]), np.array([0.5]), (4,)), "b": np.array([0.1])}
    whole = Updater(1, LinearModel(4), broadcast="model")
    (update,) = whole.on_gradient(GradientUpdate(0, 0, gradients))
    assert all(isinstance(v, np.ndarray) for v in update.weights.values())
    assert all(np.array_equal(update.weights[k], v) for k, v in whole.model.get_weights().items())
    changed = Updater(1, LinearModel(4), broadcast="changed")
    (update,) = changed.on_gradient(GradientUpdate(0, 0, gradients))
    assert update.weights["w"].indices.tolist() == [1] and whole.bytes_broadcast > changed.bytes_broadcast
    with pytest.raises(ValueError, match="broadcast must be one of"):
        Updater(1, LinearModel(4), broadcast="rows")


def _record(system, workload, replicas, rate, mode="local", **extra):
    return {"system": system, "workload": workload, "replicas": replicas, "mode": mode, "sustainable_rate": rate,
            "tf_intra_op_threads": 1, "date": "2026-11-30 10:00:00", "description": f"{workload} workload",
            "machine": {"cores": 2, "memory_gib": 23.5, "platform": "Linux", "python": "3.11"},
            "probes": [{"rate": rate, "sustainable": True}], **extra}


def test_report_states_ratios_to_flinkml_and_to_the_limit(tmp_path):
    results = tmp_path / "results.jsonl"
    records = [_record("limit", "dense", 1, 20.0), _record("limit", "dense", 2, 40.0),
               _record("dasgd", "dense", 1, 8.0, loss_vs_time=[[0, 2.3], [5, 1.9]]), _record("dasgd", "dense", 2, 12.0),
               _record("flinkml", "dense", 1, 4.0), _record("flinkml", "dense", 2, 3.0),
               {**_record("dasgd", "dense", 4, 16.0), "probes": [{"rate": 32.0, "sustainable": False},
                                                                 {"rate": 16.0, "sustainable": True, "model_busy_fraction": 0.61}]},
               _record("flinkml", "dense", 4, 2.0), _record("flinkml_full", "dense", 2, 2.0),
               {**_record("sync", "dense", 2, None), "probes": [], "error": "RuntimeError: boom"}]
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "docs" / "benchmarks.md"
    report.write_report(str(results), str(out), command="python -m benchmarks run --quick")
    text = out.read_text()
    assert "Machine: 2 cores, 23.5 GiB" in text and "python -m benchmarks run --quick" in text
    assert "dasgd / flinkml = 2.00 at 1 replica, 4.00 at 2" in text
    assert "dasgd 2 replicas / 1 replica = 1.50" in text and "dasgd 1 replica / limit 1 process = 0.40" in text
    assert "| dasgd | 2 | local | 1 | 12 | 4.00 | 0.30 |" in text
    assert "dasgd 2 replicas / limit 2 processes = 0.30; limit 2 / 1 processes = 2.00" in text
    assert "dasgd / flinkml_full (whole model) at 2 = 6.00" in text and "| flinkml_full | 2 | local | 1 | 2 |" in text
    assert "at 4 replicas dasgd / flinkml = 8.00, dasgd 4 / 1 = 2.00" in text
    assert "| dasgd | 4 | local | 1 | 16 | 8.00 | n/a | 32: no, 16: ok | 0.61 |" in text
    assert "FAILED: RuntimeError: boom" in text
    assert (tmp_path / "docs" / "img" / "benchmark_dense.png").stat().st_size > 1000


def test_report_divides_each_row_by_the_limit_of_its_own_run(tmp_path):
    results = tmp_path / "results.jsonl"
    first = [_record("limit", "dense", 1, 20.0), _record("flinkml", "dense", 1, 5.0), _record("dasgd", "dense", 1, 9.0)]
    second = [_record("limit", "dense", 1, 30.0), _record("dasgd", "dense", 1, 15.0)]  # a faster machine, later
    results.write_text("".join(json.dumps(r) + "\n" for r in first + second))
    records = report.load(str(results))
    assert records[("dense", "flinkml", 1, "local")]["_limit"] == 20.0 and records[("dense", "flinkml", 1, "local")]["_run"] == 1
    assert records[("dense", "dasgd", 1, "local")]["_limit"] == 30.0 and records[("dense", "dasgd", 1, "local")]["_run"] == 2
    out = tmp_path / "benchmarks.md"
    report.write_report(str(results), str(out))
    text = out.read_text()
    assert "| flinkml | 1 | local | 1 | 5 | 1.00 | 0.25 |" in text and "| dasgd | 1 | local | 2 | 15 | 3.00 | 0.50 |" in text
    assert "dasgd 1 replica / limit 1 process = 0.50" in text


def test_report_says_where_python_ran_from_new_records_and_from_old_ones(tmp_path):
    """Records of runs before TrainConfig.python_in say replica_execution/source_execution
    ("thread"/"process"): an old results file still renders, in the new names."""
    def render(**where):
        results, out = tmp_path / "results.jsonl", tmp_path / "benchmarks.md"
        records = [_record("limit", "dense", 1, 20.0, **where), _record("dasgd", "dense", 1, 8.0, **where)]
        results.write_text("".join(json.dumps(r) + "\n" for r in records))
        report.write_report(str(results), str(out))
        return out.read_text()

    said = "`python_in={}` (`TrainConfig.python_in`); batches made with `python_in={}`"
    assert said.format("jvm", "processes") in render(replica_execution="thread", source_execution="process")
    assert said.format("processes", "jvm") in render(python_in="processes", source_python_in="jvm")
    assert said.format("processes", "processes") in render()  # the first records: worker processes


def test_run_job_returns_the_summary_or_raises_with_the_tail_of_stderr(tmp_path):
    from benchmarks.jobrun import run_job

    script = tmp_path / "job.py"
    script.write_text("import argparse, json, sys, time\n"
                      "parser = argparse.ArgumentParser()\n"
                      "parser.add_argument('--sleep', type=float, default=0.0)\n"
                      "parser.add_argument('--fail', action='store_true')\n"
                      "parser.add_argument('--summary')\n"
                      "args = parser.parse_args()\n"
                      "print('training', flush=True)\n"
                      "time.sleep(args.sleep)\n"
                      "if args.fail:\n"
                      "    sys.exit('error: the data set is missing')\n"
                      "json.dump({'batches': 3, 'cwd': __import__('os').getcwd()}, open(args.summary, 'w'))\n")
    assert run_job(str(script), [], timeout=60, cwd=str(tmp_path)) == {"batches": 3, "cwd": os.path.realpath(tmp_path)}
    with pytest.raises(RuntimeError, match=r"job.py --fail failed \(exit 1\):\nerror: the data set is missing"):
        run_job(str(script), ["--fail"], timeout=60)
    log, pids = tmp_path / "job.log", []
    assert run_job(str(script), ["--sleep", "0.5"], timeout=60, log=str(log), watch=pids.append,
                   watch_every_s=0.05)["batches"] == 3
    assert log.read_text().startswith("training") and len(pids) >= 3 and len(set(pids)) == 1
    with pytest.raises(RuntimeError, match="did not finish within 0.5 s"):
        run_job(str(script), ["--sleep", "30"], timeout=0.5)


@pytest.mark.flink
def test_quick_benchmark_runs_end_to_end(tmp_path):
    pytest.importorskip("pyflink")
    from pyflink_tensair import cluster

    results, doc, spec = tmp_path / "results.jsonl", tmp_path / "benchmarks.md", tmp_path / "spec.json"
    # The whole path, not a real search: one probe a system, at a quarter of the plain loop's rate
    # measured first in the same run (run.py), which a working system sustains on any machine
    # (on the dense CNN one replica of either trains about as fast as the loop: docs/benchmarks.md).
    spec.write_text(json.dumps({"max_probes": 1, "seconds": 4.0}))
    run = subprocess.run([sys.executable, "-m", "benchmarks", "run", "--quick", "--spec", str(spec), "--results", str(results)],
                         capture_output=True, text=True, cwd=ROOT, env=cluster.client_environment(), timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert {r["system"] for r in records} == {"dasgd", "flinkml", "limit"}
    for r in records:
        assert "error" not in r, r.get("error")
        assert r["sustainable_rate"] > 0 and r["machine"]["cores"] >= 1
    flink_runs = [r for r in records if r["system"] != "limit"]
    for r in flink_runs:
        assert r["probes"] and all("slope" in p and "peak_memory_mb" in p for p in r["probes"])
        assert r["peak_memory_mb"]["jvm"] > 50 and r["loss_vs_time"]
    rendered = subprocess.run([sys.executable, "-m", "benchmarks", "report", "--results", str(results), "--out", str(doc)],
                              capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    assert "dasgd / flinkml" in doc.read_text()


@pytest.mark.flink
def test_limit_runs_one_plain_loop_per_replica_at_once():
    from benchmarks.throughput.run import Spec, run_limit

    limit = run_limit(Spec(limit_batches=12), "dense", 2)
    assert limit["processes"] == 2 and len(limit["process_rates"]) == 2 and min(limit["process_rates"]) > 0
    assert limit["sustainable_rate"] == pytest.approx(sum(limit["process_rates"]), abs=1e-2)


def test_bad_spec_is_refused():
    run = subprocess.run([sys.executable, "-m", "benchmarks", "run", "--systems", "dasgd,parameter_server"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 2 and "parameter_server" in run.stderr


def test_busy_fraction_is_the_share_of_wall_time_inside_the_model():
    from types import SimpleNamespace as S

    from benchmarks.throughput.run import busy_fraction

    records = [S(replica=0, time=t, model_busy_s=0.25 * t) for t in range(5)] + \
              [S(replica=1, time=t, model_busy_s=0.75 * t) for t in range(5)]
    assert busy_fraction(records) == 0.5
    assert busy_fraction([S(replica=0, time=t, model_busy_s=0.0) for t in range(3)]) is None


def test_replica_counts_the_time_its_model_works():
    from pyflink_tensair.core.replica import Replica

    class SlowModel(LinearModel):
        def compute_gradients(self, batch):
            import time
            time.sleep(0.02)
            return super().compute_gradients(batch)

    replica = Replica(0, SlowModel(3))
    events = [e for b in make_regression_batches(3, 3) for e in replica.on_batch(b)]
    busy = [e.model_busy_s for e in events if type(e).__name__ == "Metrics"]
    assert busy == sorted(busy) and busy[-1] >= 0.06


def _costs(**overrides):
    from benchmarks.scaleout import Costs

    fields = dict(grad_s=0.040, apply_s=0.004, sum_s=0.0005, set_s=0.001, grad_bytes=500_000, encode_grad_s=0.0005,
                  decode_grad_s=0.0001, model_bytes=500_000, changed_bytes={1: 500_000, 64: 500_000},
                  encode_model_s=0.0005, decode_model_s=0.0001, h_batch_s=0.030, h_message_s=0.005, h_byte_s=1e-9)
    fields.update(overrides)
    return Costs(**fields)


def test_scaleout_model_dasgd_is_bound_by_its_trainer_until_peers_cost_more_than_the_step():
    from benchmarks.scaleout import step_times, throughput

    costs = _costs()
    one, two = throughput(costs, "dasgd", 1), throughput(costs, "dasgd", 2)
    assert one == pytest.approx(1 / (0.040 + 0.004))  # trainer-bound: grad + its own apply
    assert two == pytest.approx(2 / max(0.040 + 2 * 0.004, 0.030 + 0.0005 + 0.0051 + 0.0001))
    parts = step_times(costs, "dasgd", 32)
    assert parts["host"] > parts["trainer"] and parts["step"] == parts["host"]  # 31 messages in per batch


def test_scaleout_model_flinkml_updater_saturates_and_the_bound_costs_nothing_when_latency_is_short():
    from benchmarks.scaleout import saturation, throughput

    costs = _costs()
    n = saturation(costs, "flinkml_full")
    assert n is not None and 1 < n < 64
    assert throughput(costs, "flinkml_full", 64) < 2 * throughput(costs, "flinkml_full", n)  # flat beyond it
    assert throughput(costs, "bounded", 4, staleness_bound=4) == pytest.approx(throughput(costs, "dasgd", 4))
    assert throughput(costs, "sync", 4) < throughput(costs, "dasgd", 4)


def test_scaleout_model_on_a_small_machine_is_capped_by_its_cpu():
    from benchmarks.scaleout import throughput

    costs = _costs(cpu_per_batch_s=0.080)
    assert throughput(costs, "dasgd", 1, cores=2) == pytest.approx(1 / 0.044)  # the trainer, not the CPU, binds
    # two replicas: each batch also costs a peer's apply and message; two cores no longer keep up
    assert throughput(costs, "dasgd", 2, cores=2) == pytest.approx(2 / (0.080 + 0.0005 + 0.004 + 0.005 + 0.0005))
    # a message costs its sender once (encoding and hand-off), each peer its apply and host time
    sending = _costs(cpu_per_batch_s=0.080, h_send_s=0.012)
    assert throughput(sending, "dasgd", 4, cores=2) == pytest.approx(
        2 / (0.080 + 0.0005 + 0.012 + 3 * (0.004 + 0.005 + 0.0005)))
    assert throughput(sending, "dasgd", 1, cores=2) == throughput(costs, "dasgd", 1, cores=2)  # no peer, no message


def test_replica_path_profile_is_per_batch_from_cumulative_metrics():
    from benchmarks.replica_path import profile
    from pyflink_tensair.core.events import Metrics

    def metrics(step, t):  # 50 ms per step, 30 of them in the model, 20 in callbacks, 1 in the codec
        return Metrics(replica=0, phase="batch", time=t, local_step=step, model_version=step, loss=0.1, accuracy=None,
                       staleness=0, batches_per_s=0.0, held_batches=0, batch_id=step, model_busy_s=0.030 * step, callback_s=0.020 * step, codec_s=0.001 * step, idle_s=0.0)

    got = profile([metrics(s, 0.05 * s) for s in range(1, 21)])
    assert got == {"wall": 50.0, "model": 30.0, "codec": 1.0, "callback": 20.0, "idle": 0.0, "outside": 30.0}


def test_replica_path_candidates_name_probe_arguments_and_where_they_run():
    from benchmarks.replica_path import CANDIDATES, candidate_args, on_cluster
    from benchmarks.throughput.probe_job import build_parser

    assert candidate_args("trainer-thread+jvm") == ["--trainer-thread", "--python-in", "jvm"]
    assert candidate_args("trainer-thread+jvm+cluster") == candidate_args("trainer-thread+jvm")
    assert on_cluster("trainer-thread+jvm+cluster") and not on_cluster("trainer-thread+jvm")
    assert candidate_args("no-trainer-thread")[-2:] == ["--python-in", "processes"]  # the replicas' place always said
    with pytest.raises(SystemExit, match="unknown candidate part 'clustr'.*cluster"):
        candidate_args("trainer-thread+clustr")
    with pytest.raises(SystemExit, match="'thread' is now 'trainer-thread', 'embedded' is now 'jvm'"):
        candidate_args("thread+embedded")  # a command of docs/measurements.md's past runs
    base = ["--system", "dasgd", "--workload", "dense", "--batches", "10", "--outdir", "/tmp/x"]
    for name in CANDIDATES:  # every candidate is a command line the probe takes
        build_parser().parse_args(base + candidate_args(name))


def test_probe_job_passes_broadcast_every_to_our_replicas():
    from benchmarks.replica_path import candidate_args
    from benchmarks.throughput.probe_job import parse_args

    base = ["--system", "dasgd", "--workload", "dense", "--batches", "10", "--outdir", "/tmp/x"]
    assert parse_args(base).broadcast_every == 1
    assert parse_args(base + candidate_args("trainer-thread+broadcast-8")).broadcast_every == 8


def test_benchmark_flags_of_config_fields_are_spelled_as_the_jobs_flags():
    """One name per idea: the probe's (and `python -m benchmarks run`'s) flag for a TrainConfig
    field is the jobs' flag for it, and takes the same values."""
    from benchmarks.__main__ import main as benchmarks_main
    from benchmarks.throughput.probe_job import build_parser, parse_args
    from pyflink_tensair.cli.settings import settings

    jobs = {row.flag for row in settings()} | {"--no-trainer-thread"}
    probe = {option for action in build_parser()._actions for option in action.option_strings}
    fields = {"--replicas", "--staleness-bound", "--broadcast-every", "--sparse-values", "--tf-intra-op-threads",
              "--trainer-thread", "--no-trainer-thread", "--python-in", "--checkpoints-interval-s", "--checkpoints-dir",
              "--checkpoints-state-backend", "--peer-updates-average-every"}
    assert fields <= probe and fields <= jobs
    old = {"--tf-threads", "--trainer", "--replica-execution", "--source-execution", "--checkpoint-interval",
           "--checkpoint-dir", "--state-backend", "--average-every"}
    assert not old & probe
    base = ["--system", "dasgd", "--workload", "dense", "--batches", "10", "--outdir", "/tmp/x"]
    args = parse_args(base + ["--checkpoints-interval-s", "none", "--peer-updates-average-every", "none",
                              "--no-trainer-thread", "--python-in", "processes", "--source-python-in", "jvm"])
    assert (args.checkpoints_interval_s, args.peer_updates_average_every, args.trainer_thread) == (None, None, False)
    assert (args.python_in, args.source_python_in) == ("processes", "jvm")
    with pytest.raises(SystemExit):
        benchmarks_main(["run", "--replica-execution", "thread"])


def test_a_spec_file_with_old_field_names_is_refused_naming_the_new_ones(tmp_path, capsys):
    from benchmarks.__main__ import main as benchmarks_main

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"replica_execution": "thread", "tf_threads": 1, "seconds": 4.0}))
    with pytest.raises(SystemExit) as exit_:
        benchmarks_main(["run", "--spec", str(spec), "--results", str(tmp_path / "results.jsonl")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "'replica_execution' is now 'python_in' ('thread' is 'jvm'" in err
    assert "'tf_threads' is now 'tf_intra_op_threads'" in err and not (tmp_path / "results.jsonl").exists()


def test_thread_cpu_labels_threads_by_kind_and_counts_batches_in_the_window(tmp_path):
    import os
    import threading

    from benchmarks import thread_cpu

    assert thread_cpu._kind(7, "bench: replicas", {7: "Source: x (1/2)#0"}, {7: "Dummy-1"}) == "java: Source: x (#/#)##"
    assert thread_cpu._kind(8, "bench: replicas", {}, {8: "tensair-trainer-1"}) == "python: tensair-trainer-#"
    assert thread_cpu._kind(9, "bench: replicas", {}, {}) == "native: bench: replicas"
    for replica, steps in ((0, [(10.0, 5), (11.0, 9), (12.0, 14)]), (1, [(10.5, 4), (11.5, 6)])):
        with open(tmp_path / f"metrics-{replica}.jsonl", "w") as f:
            for t, step in steps:
                f.write(f'{{"replica": {replica}, "phase": "batch", "time": {t}, "local_step": {step}}}\n')
            f.write('{"replica": 0, "phase": "ba')  # a line still being written
    assert thread_cpu.trained_between(str(tmp_path), 10.0, 11.6) == (9 - 5) + (6 - 4)
    assert thread_cpu.trained_between(str(tmp_path), 20.0, 30.0) is None

    done = threading.Event()
    spinner = threading.Thread(target=lambda: [sum(range(10_000)) for _ in iter(lambda: done.is_set(), True)])
    spinner.start()
    try:
        window = thread_cpu.measure(os.getpid(), 0.3, java=False, python=False)
    finally:
        done.set()
        spinner.join()
    assert spinner.native_id in window.threads and window.threads[spinner.native_id][1] > 0.05
    assert window.cpu_s == pytest.approx(sum(window.by_kind().values()))


def test_drift_detector_table_covers_every_stream_and_detector(tmp_path):
    from benchmarks import drift_detectors

    out = tmp_path / "drift.md"
    rows = drift_detectors.main(["--seeds", "1", "--length-scale", "0.2", "--out", str(out)])
    kinds = len(drift_detectors.DRIFTING) + len(drift_detectors.AT_REST)
    assert len(rows) == kinds * len(drift_detectors.DETECTORS)
    big = [r for r in rows if r["values"] == "gaussian" and r["shape"] == "abrupt" and r["magnitude"] == 1.0]
    assert all(r["missed"] == 0 and r["drifts"] == 4 and r["median_delay"] < 300 for r in big)
    assert all(r["drifts"] == 0 and r["median_delay"] is None for r in rows if r["shape"] == "none")
    text = out.read_text()
    assert "--seeds 1 --length-scale 0.2" in text and text.count("\n| gaussian |") == 3 * 3 * 2 + 3


def test_staleness_accuracy_reports_each_replica_and_the_average():
    from benchmarks import staleness_accuracy

    rows = staleness_accuracy.main(["--seeds", "1", "--delays", "0,8", "--bounds", "0,none", "--passes", "1",
                                    "--remedies", "plain,scale=0.5"])
    assert [(r["replicas"], r["staleness_bound"], r["delivery_delay"], r["remedy"]) for r in rows] == [
        (1, None, 0, "plain"), (2, 0, 0, "plain"), (2, None, 0, "plain"), (2, None, 0, "scale=0.5"),
        (2, None, 8, "plain"), (2, None, 8, "scale=0.5")]
    single, sync, fresh, _, stale, damped = rows
    assert single["max_weight_diff"] == 0.0 and len(single["replica_accuracy"]) == 1
    assert sync["max_weight_diff"] == 0.0 and sync["replica_accuracy"][0] == sync["averaged_accuracy"]
    assert stale["max_staleness"] > fresh["max_staleness"] and stale["max_weight_diff"] > 0
    assert damped["replica_accuracy"] != stale["replica_accuracy"]  # the remedy changed the run
    assert all(0.0 <= a <= 1.0 for r in rows for a in r["replica_accuracy"] + [r["averaged_accuracy"]])
    with pytest.raises(ValueError, match="a remedy is plain, scale=F, inverse, sgd=LR or average=K"):
        staleness_accuracy.main(["--remedies", "scale"])


def test_learning_quality_parses_settings_and_tabulates_means_per_setting():
    from benchmarks import learning_quality

    assert learning_quality.parse_settings("a=--replicas 1;;b = --replicas 2 --peer-updates-scale 0.5") == [
        ("a", ["--replicas", "1"]), ("b", ["--replicas", "2", "--peer-updates-scale", "0.5"])]
    with pytest.raises(ValueError, match="a setting is 'label=flags'"):
        learning_quality.parse_settings("--replicas 2")
    single = learning_quality.figures({"replicas": 1, "holdout_accuracy": 0.9, "final_loss": 0.3})
    assert single["holdout_accuracy_averaged"] == 0.9 and single["cooccurring_after"] is None
    words = learning_quality.figures({"replicas": 2, "final_loss": 0.5,
                                      "cosine": {"cooccurring_after": 0.47, "shuffled_after": 0.05}})
    assert words["cooccurring_after"] == 0.47 and words["cooccurring_gap"] == pytest.approx(0.42)
    assert words["holdout_accuracy"] is None
    rows = [{"setting": "sync", "seeds": [{"final_loss": 0.5}, {"final_loss": 0.3}], "mean": {"final_loss": 0.4}}]
    text = learning_quality.table(rows)
    assert "| setting | final loss |" in text and "| sync | **0.4** (0.5 / 0.3) |" in text


def test_the_id_table_benchmark_runs_memory_and_quality(tmp_path):
    from benchmarks import id_tables

    memory = id_tables.main(["memory", "--events", "20000", "--capacity", "200", "--chunk", "2000",
                             "--plot", str(tmp_path / "memory.png")])
    assert memory["rows"][-1]["distinct_ids"] > 10 * 200 and memory["rows"][-1]["rows_used"] == 200
    assert memory["rows"][-1]["traced_bytes"] < 1.1 * memory["rows"][0]["traced_bytes"]  # bounded
    assert (tmp_path / "memory.png").stat().st_size > 1000
    quality = id_tables.main(["quality", "--workload", "clicks", "--events", "6000", "--capacity", "300",
                              "--repeats", "1", "--json", str(tmp_path / "q.json")])
    assert set(quality["summary"]) == {"oracle", "table", "hashing"}
    assert all(0.3 < s["median"] < 1.0 for s in quality["summary"].values())


def test_the_peers_ratio_pairs_each_of_our_runs_with_flink_mls_of_the_same_repeat():
    from benchmarks.peers import against_flinkml

    results = {("flinkml", None, 1024): [{"examples_per_s": 100.0}, {"examples_per_s": 200.0}],
               ("ours", "json", 1024): [{"examples_per_s": 300.0}, {"examples_per_s": 400.0}],
               ("ours", "rows", 256): [{"examples_per_s": 150.0}, {"examples_per_s": None}]}
    best = {("flinkml", None): 1024, ("ours", "json"): 1024, ("ours", "rows"): 256}
    ratios = against_flinkml(results, best)
    assert ratios["json"]["pairs"] == [3.0, 2.0] and ratios["json"]["median"] == 2.5
    assert ratios["rows"]["pairs"] == [1.5]  # a run too short to measure is left out, not counted as 0
    assert against_flinkml(results, {("ours", "json"): 1024}) == {}


def test_the_ingestion_window_shares_say_how_busy_the_model_and_how_idle_the_trainer_was():
    from benchmarks.ingestion_job import window_shares

    records = [{"phase": "batch", "replica": 0, "time": float(t), "model_busy_s": 0.25 * t, "callback_s": 0.5 * t,
                "idle_s": None} for t in range(10)]
    assert window_shares(records) == {"model_busy_share": 0.25, "callback_share": 0.5, "idle_share": None}
