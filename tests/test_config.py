import pytest

from pyflink_tensair import Checkpoints, ConfigError, Exports, LatencySettings, Mode, PeerUpdates, PythonIn, TrainConfig


def test_defaults_are_valid_and_frozen():
    config = TrainConfig()
    assert config.replicas == 1 and config.staleness_bound == 1 and config.mode is Mode.TRAIN
    assert config.peer_updates.average_every == 8 and not config.peer_updates.weighs_gradients
    assert TrainConfig(staleness_bound=0).peer_updates == config.peer_updates  # nothing to average: allowed
    with pytest.raises(Exception):
        config.replicas = 3


@pytest.mark.parametrize("fields, message", [
    ({"replicas": 0}, "replicas must be an int >= 1. Received: replicas=0"),
    ({"replicas": 2.0}, "replicas must be an int >= 1. Received: replicas=2.0"),
    ({"staleness_bound": -1}, "staleness_bound must be an int >= 0 or None. Received: staleness_bound=-1"),
    ({"staleness_bound": True}, "staleness_bound must be an int >= 0 or None. Received: staleness_bound=True"),
    ({"broadcast_every": 0}, "broadcast_every must be an int >= 1. Received: broadcast_every=0"),
    ({"staleness_bound": 0, "broadcast_every": 2}, "broadcast_every must be 1 when staleness_bound=0"),
    ({"buffer_capacity": 0}, "buffer_capacity must be an int >= 1. Received: buffer_capacity=0"),
    ({"backpressure": "yes"}, "backpressure must be True or False. Received: backpressure='yes'"),
    ({"mode": "learn"}, "mode must be one of 'train', 'serve', 'auto'. Received: mode='learn'"),
    ({"python_in": "thread"}, "python_in must be one of 'jvm', 'processes', 'client'. Received: python_in='thread'"),
    ({"trainer_thread": "inline"}, "trainer_thread must be True or False. Received: trainer_thread='inline'"),
    ({"checkpoints": 10}, "checkpoints must be a Checkpoints or None. Received: checkpoints=10"),
    ({"latency": {"bundle_size": 1}}, "latency must be a LatencySettings or None"),
    ({"name": "my job"}, "name must be a non-empty string"),
    ({"tf_intra_op_threads": 0}, "tf_intra_op_threads must be an int >= 1 or None. Received: tf_intra_op_threads=0"),
    ({"sparse_values": "bfloat16"}, "sparse_values must be 'float32' or 'float16'. Received: sparse_values='bfloat16'"),
    ({"peer_updates": {"scale": 0.5}}, "peer_updates must be a PeerUpdates. Received: peer_updates={'scale': 0.5}"),
    ({"staleness_bound": 0, "peer_updates": PeerUpdates(scale=0.5)}, "synchronous replicas (staleness_bound=0) apply"),
])
def test_errors_name_field_rule_and_value(fields, message):
    with pytest.raises(ConfigError) as err:
        TrainConfig(**fields)
    assert message in str(err.value)


@pytest.mark.parametrize("old", ["replica_execution", "workers", "checkpoint_interval_s", "export_dir"])
def test_the_names_before_0_2_are_unknown_fields(old):
    """0.2.0 refused them with their new names; the CHANGELOG keeps the map since."""
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{old}'"):
        TrainConfig(**{old: 1})


def test_enums_accept_their_values():
    config = TrainConfig(mode="serve", python_in="client")
    assert config.mode is Mode.SERVE and config.python_in is PythonIn.CLIENT and TrainConfig().python_in is PythonIn.JVM


@pytest.mark.parametrize("make, message", [
    (lambda: Checkpoints(interval_s=0), "Checkpoints.interval_s must be a number of seconds >= 0.01. Received: Checkpoints.interval_s=0"),
    (lambda: Checkpoints(interval_s="10"), "Checkpoints.interval_s must be a number of seconds >= 0.01"),
    (lambda: Checkpoints(state_backend="forst"), "Checkpoints.state_backend must be 'hashmap' or 'rocksdb'. Received: state_backend='forst'"),
    (lambda: Checkpoints(dir=""), "Checkpoints.dir must be a non-empty path or URI, or None"),
    (lambda: Checkpoints(restart_attempts=-1), "Checkpoints.restart_attempts must be an int >= 0. Received: Checkpoints.restart_attempts=-1"),
    (lambda: Exports(every_s=0, dir="x"), "Exports.every_s must be a number of seconds > 0. Received: Exports.every_s=0"),
    (lambda: Exports(every_s=5.0, dir=""), "Exports.dir must be a non-empty path. Received: dir=''"),
])
def test_checkpoints_and_exports_name_field_rule_and_value(make, message):
    with pytest.raises(ConfigError) as err:
        make()
    assert message in str(err.value)


def test_latency_settings_map_to_flink_options():
    options = LatencySettings(bundle_size=10, bundle_time_ms=5, buffer_timeout_ms=0, network_buffer_kb=64).as_flink_options()
    assert options == {"python.fn-execution.bundle.size": "10", "python.fn-execution.bundle.time": "5",
                       "execution.buffer-timeout.interval": "0 ms", "taskmanager.memory.segment-size": "64kb"}
    with pytest.raises(ConfigError, match="network_buffer_kb must be an int >= 4. Received: network_buffer_kb=1"):
        LatencySettings(network_buffer_kb=1)
    with pytest.raises(ConfigError, match="bundle_time_ms must be an int >= 1. Received: bundle_time_ms=0"):
        LatencySettings(bundle_time_ms=0)


@pytest.mark.parametrize("fields, message", [
    ({"scale": 0}, "PeerUpdates.scale must be a number in (0, 1]. Received: scale=0"),
    ({"scale": 1.5}, "PeerUpdates.scale must be a number in (0, 1]. Received: scale=1.5"),
    ({"scale": True}, "PeerUpdates.scale must be a number in (0, 1]. Received: scale=True"),
    ({"damping": "exp"}, "PeerUpdates.damping must be 'none' or 'inverse'. Received: damping='exp'"),
    ({"rule": "adam"}, "PeerUpdates.rule must be 'optimizer' or 'sgd'. Received: rule='adam'"),
    ({"rule": "sgd"}, "PeerUpdates(rule='sgd') needs sgd_learning_rate, a number > 0"),
    ({"rule": "sgd", "sgd_learning_rate": -1.0}, "Received: sgd_learning_rate=-1.0"),
    ({"sgd_learning_rate": 0.1}, "sgd_learning_rate is for PeerUpdates(rule='sgd')"),
])
def test_peer_updates_errors_name_field_rule_and_value(fields, message):
    with pytest.raises(ConfigError) as err:
        PeerUpdates(**fields)
    assert message in str(err.value)


def test_peer_update_factor_damps_by_the_steps_a_gradient_is_old():
    assert PeerUpdates.tensair().plain and not PeerUpdates().plain and PeerUpdates().factor(10, 2) == 1.0
    assert not PeerUpdates(scale=0.5).plain and PeerUpdates(scale=0.5).factor(10, 2) == 0.5
    damped = PeerUpdates(damping="inverse")
    assert [damped.factor(k, 5) for k in (3, 5, 6, 9)] == [1.0, 1.0, 0.5, 0.2]  # never above 1: a peer ahead is fresh


@pytest.mark.parametrize("fields, message", [
    (dict(bad_input="drop"), "Guards.bad_input must be 'dead_letter' or 'fail'. Received: bad_input='drop'"),
    (dict(max_batch_bytes=0), "max_batch_bytes must be an int >= 1. Received: max_batch_bytes=0"),
    (dict(max_gradient_norm=float("inf")), "max_gradient_norm must be a finite number > 0 or None"),
    (dict(max_gradient_norm=-1.0), "max_gradient_norm must be a finite number > 0 or None"),
    (dict(norm_action="scale"), "Guards.norm_action must be 'reject' or 'clip'. Received: norm_action='scale'"),
])
def test_guards_errors_name_field_rule_and_value(fields, message):
    from pyflink_tensair import Guards

    with pytest.raises(ConfigError) as err:
        Guards(**fields)
    assert message in str(err.value)


def test_guards_default_to_dead_letters_and_come_from_the_job_flags():
    import argparse

    from pyflink_tensair import Guards
    from pyflink_tensair.cli import flags

    assert TrainConfig().guards == Guards() and Guards().bad_input == "dead_letter"
    with pytest.raises(ConfigError, match="guards must be a Guards"):
        TrainConfig(guards="fail")
    parser = argparse.ArgumentParser()
    flags.add_job_arguments(parser, batches=10, batch_size=8)
    args = parser.parse_args(["--guards-bad-input", "fail", "--guards-max-gradient-norm", "5", "--guards-norm-action", "clip"])
    assert flags.config_from_args(args).guards == Guards(bad_input="fail", max_gradient_norm=5.0, norm_action="clip")
