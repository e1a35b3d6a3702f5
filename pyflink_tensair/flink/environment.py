"""Job-wide settings the replicas need (latency of the loop, Python worker mode, the channel jar)
and what the runtime tells an operator (its subtask, the end of time)."""

from __future__ import annotations

import os
import sys

from ..config import PythonIn, TrainConfig
from ..errors import ConfigError

_WORKER_MODE_VARIABLE = "_python_worker_execution_mode"  # read by PyFlink when an environment is created
_LOCAL_NETWORK_MEMORY = "256mb"  # room for 1 MB network buffers (Flink's local default is 64 MB)
_LOOPBACK_ADDRESS = "python.loopback-server.address"  # set by PyFlink when it chose loopback
END_OF_TIME = 2 ** 63 - 1  # Long.MAX_VALUE: the watermark a bounded input sends when it ends


def subtask_index(runtime_context) -> int:
    """``runtime_context.get_index_of_this_subtask()``, also in thread mode: PyFlink 2.3's embedded
    context calls the Java ``getIndexOfThisSubtask()``, which Flink 2.0 moved to ``getTaskInfo()``."""
    try:
        return runtime_context.get_index_of_this_subtask()
    except AttributeError:  # 'pemja.PyJObject' object has no attribute 'getIndexOfThisSubtask'
        return int(runtime_context._runtime_context.getTaskInfo().getIndexOfThisSubtask())


def env_configuration(env):
    """The PyFlink ``Configuration`` of ``env`` (changes to it reach the job). ``env``: a PyFlink
    environment or its Java one (``stream._j_data_stream.getExecutionEnvironment()``: wrapping
    that in a new PyFlink environment would start another loopback server)."""
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.util.java_utils import get_j_env_configuration

    # not getattr(env, ...): a py4j object answers every attribute name
    j_env = env._j_stream_execution_environment if isinstance(env, StreamExecutionEnvironment) else env
    return Configuration(j_configuration=get_j_env_configuration(j_env))


def is_local(env) -> bool:
    from pyflink.util.java_utils import get_j_env_configuration, is_local_deployment

    return bool(is_local_deployment(get_j_env_configuration(env._j_stream_execution_environment)))


def use_this_interpreter(env) -> None:
    """Makes the job's Python workers run this interpreter, unless the job names one (``env`` as
    :func:`env_configuration` takes it): PyFlink's
    default, ``python`` on the PATH, has no pyflink in a virtual environment that is not activated
    (``No module named 'pyflink'`` in every worker)."""
    conf = env_configuration(env)
    for key in ("python.executable", "python.client.executable"):
        if not conf.contains_key(key):
            conf.set_string(key, sys.executable)


def prepare_environment(env, config: TrainConfig) -> None:
    """Applies the latency settings, process-mode workers and the interpreter to ``env``."""
    conf = env_configuration(env)
    if conf.get_string("python.execution-mode", "process") == "thread":
        raise ConfigError(
            "python.execution-mode must be 'process' for the job (it would put every Python "
            "operator into the TaskManagers' JVMs); to run only the replicas there, set "
            "TrainConfig(python_in='jvm'), the default. Received: python.execution-mode='thread'")
    # not set to 'process' here (its default): at submission PyFlink gives every Python operator
    # the job's settings, and a set key would override a thread-mode replica operator's own
    local = is_local(env)
    use_this_interpreter(env)
    if config.latency is not None:
        for key, value in config.latency.as_flink_options().items():
            if key.startswith("python."):
                conf.set_string(key, value)
            elif key.startswith("taskmanager.") and local and not conf.contains_key(key):
                conf.set_string(key, value)  # a local mini-cluster is started from the job's settings
        if local:
            for key in ("taskmanager.memory.network.min", "taskmanager.memory.network.max"):
                if not conf.contains_key(key):
                    conf.set_string(key, _LOCAL_NETWORK_MEMORY)
        env.set_buffer_timeout(config.latency.buffer_timeout_ms)
    # A local mini-cluster runs Python functions inside the client ("loopback") unless told
    # otherwise; a cluster always uses worker processes. PyFlink decides when an environment is
    # created, usually before train() is called: it starts a loopback server and records its
    # address in the configuration. Process mode must drop that address, or every Python operator
    # still runs as a thread of the client, all of them sharing its GIL. Every PyFlink environment
    # made later around the same job (``StreamExecutionEnvironment(j_env)``, as the relay and users'
    # code do) would set it again, unless PyFlink's own switch says process.
    if config.python_in is not PythonIn.CLIENT:
        os.environ[_WORKER_MODE_VARIABLE] = "process"
        conf.remove_config(_LOOPBACK_ADDRESS)
    elif local and not conf.contains_key(_LOOPBACK_ADDRESS):
        os.environ[_WORKER_MODE_VARIABLE] = "loopback"
        env._open()  # starts PyFlink's loopback server and records its address


def keep_every_sink(env) -> None:
    """Turns PyFlink's Python operator chaining off for ``env``'s job. With it on,
    ``execute_and_collect()`` keeps only the collected stream's ancestors
    (``PythonOperatorChainingOptimizer.apply(env, transformation)``): every other sink of the job
    (a feedback sink, a side output's file) is dropped, and a feedback loop never ends."""
    env_configuration(env).set_string("python.operator-chaining.enabled", "false")


def add_channel_jar(env) -> str:
    """Builds (once) and adds the project's Java classes (the feedback channel, the file sinks) to
    the job and to this client's class loader; returns the jar's path. ``env`` as
    :func:`env_configuration` takes it (what PyFlink's ``add_jars`` does, without needing a PyFlink
    environment)."""
    from ..jvm import channel_jar

    return add_jar(env, channel_jar())


def add_jar(env, path: str) -> str:
    """Adds the jar at ``path`` to the job (``pipeline.jars``) and to this client's class loader, once."""
    from pyflink.common import Configuration
    from pyflink.util.java_utils import add_jars_to_context_class_loader

    url = "file://" + path
    conf = env_configuration(env)
    jars = Configuration.parse_list_value(conf.get_string("pipeline.jars", "") or None)
    if url not in jars:
        add_jars_to_context_class_loader([url])
        conf.set_string("pipeline.jars", str([*jars, url]))
    return path
