"""Where one Python operator runs: its own Python execution mode inside a job whose other Python
operators keep theirs.

PyFlink picks every Python operator's class from the job's ``python.execution-mode``. These
builders make the operator themselves, so the replicas (and the baselines' training operators)
can run in thread mode, inside the TaskManagers' JVMs, while the user's maps stay in Python
worker processes. In process mode they are PyFlink's own ``process``.

Example::

    workers = keyed_co_process(keyed.connect(feedback), MyFunction(), Types.STRING(), "jvm")
"""

from __future__ import annotations

import os

from ..config import PythonIn

_EMBEDDED = "org.apache.flink.streaming.api.operators.python.embedded"


def in_jvm(python_in) -> bool:
    """Whether ``python_in`` (a :class:`~pyflink_tensair.PythonIn` or its value) runs Python inside
    the TaskManagers' JVMs; ``"processes"`` and ``"client"`` are PyFlink's own process mode.

        >>> in_jvm("jvm"), in_jvm(PythonIn.CLIENT)
        (True, False)
    """
    return PythonIn(python_in) is PythonIn.JVM


def operator_configuration(j_env, python_in):
    """The Java configuration a Python operator run as ``python_in`` says gets: the job's own in process
    mode; in thread mode a copy with ``python.execution-mode: thread`` (PyFlink's merge at
    submission keeps an operator's own keys), and the job's ``python.pythonpath`` gains this
    interpreter's import paths (:func:`embedded_python_path`)."""
    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import get_j_env_configuration

    j_config = get_j_env_configuration(j_env)
    if not in_jvm(python_in):
        return j_config
    # PEMJA's interpreter starts from the base Python of python.executable, without a virtual
    # environment's packages (it fails on `import pemja`). Job-wide, not only on this operator:
    # a job's Python operators share one Python environment per TaskManager, made by whichever
    # opens first (a process-mode map behind the replicas, say).
    paths = j_config.getString("python.pythonpath", "").split(os.pathsep) + embedded_python_path().split(os.pathsep)
    j_config.setString("python.pythonpath", os.pathsep.join(dict.fromkeys(p for p in paths if p)))
    j_config = get_gateway().jvm.org.apache.flink.configuration.Configuration(j_config)
    j_config.setString("python.execution-mode", "thread")
    return j_config


def embedded_python_path() -> str:
    """This interpreter's import paths (folders that exist), for an embedded interpreter that
    must import what this one does: the virtual environment's site-packages, and the folders of
    the packages imported here that no path names (an editable install is found by an import hook
    that a ``.pth`` file sets up, and PEMJA's interpreter reads no ``.pth`` file). On a cluster
    the TaskManagers need the same paths.

    Example::

        >>> import os, site, pyflink_tensair
        >>> paths = embedded_python_path().split(os.pathsep)
        >>> all(p in paths for p in site.getsitepackages() if os.path.isdir(p))
        True
        >>> os.path.dirname(os.path.dirname(os.path.abspath(pyflink_tensair.__file__))) in paths
        True
    """
    import site
    import sys

    roots = []
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if "." in name or not where:
            continue
        where = os.path.dirname(os.path.abspath(where))
        roots.append(os.path.dirname(where) if os.path.basename(module.__file__) == "__init__.py" else where)
    paths = [os.path.abspath(p) for p in [*sys.path, *site.getsitepackages(), *roots] if p and os.path.isdir(p)]
    return os.pathsep.join(dict.fromkeys(paths))


def keyed_co_process(connected, function, output_type, python_in, operator_class=None, operator_args=()):
    """``connected.process(function, output_type)`` for keyed ``connected`` streams, where ``python_in`` says;
    ``operator_class`` (a Java class taking PyFlink's keyed co-process arguments, then
    ``operator_args``) replaces PyFlink's own operator of that mode."""
    from pyflink.datastream import DataStream
    from pyflink.datastream.data_stream import _create_j_data_stream_python_function_info
    from pyflink.fn_execution.flink_fn_execution_pb2 import UserDefinedDataStreamFunction
    from pyflink.java_gateway import get_gateway

    if operator_class is None and not in_jvm(python_in):
        return connected.process(function, output_type=output_type)
    if operator_class is None:
        operator_class = getattr(get_gateway().jvm, f"{_EMBEDDED}.EmbeddedPythonKeyedCoProcessOperator")
    j_first, j_second = connected.stream1._j_data_stream, connected.stream2._j_data_stream
    j_output_type = output_type.get_java_type_info()
    operator = operator_class(
        operator_configuration(j_first.getExecutionEnvironment(), python_in),
        _create_j_data_stream_python_function_info(function, UserDefinedDataStreamFunction.KEYED_CO_PROCESS),
        j_first.getTransformation().getOutputType(), j_second.getTransformation().getOutputType(), j_output_type,
        *operator_args)
    return DataStream(j_first.connect(j_second).transform("Keyed Co-Process", j_output_type, operator))


def keyed_process(keyed, function, output_type, python_in):
    """``keyed.process(function, output_type)`` for a ``KeyedStream`` of ``Row(key, value)`` rows
    keyed on the JVM (:func:`~.routing.keyed_by_replica`), where ``python_in`` says."""
    from pyflink.datastream import DataStream
    from pyflink.datastream.data_stream import _create_j_data_stream_python_function_info
    from pyflink.fn_execution.flink_fn_execution_pb2 import UserDefinedDataStreamFunction
    from pyflink.java_gateway import get_gateway

    if not in_jvm(python_in):
        return keyed.process(function, output_type=output_type)
    j_keyed = keyed._j_data_stream
    j_output_type = output_type.get_java_type_info()
    operator = getattr(get_gateway().jvm, f"{_EMBEDDED}.EmbeddedPythonKeyedProcessOperator")(
        operator_configuration(j_keyed.getExecutionEnvironment(), python_in),
        _create_j_data_stream_python_function_info(function, UserDefinedDataStreamFunction.KEYED_PROCESS),
        j_keyed.getTransformation().getOutputType(), j_output_type)
    return DataStream(j_keyed.transform("KEYED PROCESS", j_output_type, operator))


def process(stream, function, output_type, python_in):
    """``stream.process(function, output_type)`` for a non-keyed ``stream``, where ``python_in`` says."""
    from pyflink.datastream import DataStream
    from pyflink.datastream.data_stream import _create_j_data_stream_python_function_info
    from pyflink.fn_execution.flink_fn_execution_pb2 import UserDefinedDataStreamFunction
    from pyflink.java_gateway import get_gateway

    if not in_jvm(python_in):
        return stream.process(function, output_type=output_type)
    j_stream = stream._j_data_stream
    j_output_type = output_type.get_java_type_info()
    operator = getattr(get_gateway().jvm, f"{_EMBEDDED}.EmbeddedPythonProcessOperator")(
        operator_configuration(j_stream.getExecutionEnvironment(), python_in),
        _create_j_data_stream_python_function_info(function, UserDefinedDataStreamFunction.PROCESS),
        j_stream.getTransformation().getOutputType(), j_output_type)
    return DataStream(j_stream.transform("PROCESS", j_output_type, operator))


def mapped(stream, function, output_type, python_in):
    """``stream.map(function, output_type)`` for a plain callable ``function`` of one record (not a
    ``MapFunction``: no ``open``/``close``), where ``python_in`` says: inside the TaskManagers' JVMs
    as a ProcessFunction calling it on each record (a plain PyFlink ``map`` would start a Python
    worker process of its own there), PyFlink's own ``map`` in process mode."""
    if not in_jvm(python_in):
        return stream.map(function, output_type=output_type)
    from pyflink.datastream import ProcessFunction

    class Mapped(ProcessFunction):
        def process_element(self, value, ctx):
            yield function(value)

    return process(stream, Mapped(), output_type, python_in)


def co_process(connected, function, output_type, python_in):
    """``connected.process(function, output_type)`` for non-keyed ``connected`` streams, where ``python_in`` says."""
    from pyflink.datastream import DataStream
    from pyflink.datastream.data_stream import _create_j_data_stream_python_function_info
    from pyflink.fn_execution.flink_fn_execution_pb2 import UserDefinedDataStreamFunction
    from pyflink.java_gateway import get_gateway

    if not in_jvm(python_in):
        return connected.process(function, output_type=output_type)
    j_first, j_second = connected.stream1._j_data_stream, connected.stream2._j_data_stream
    j_output_type = output_type.get_java_type_info()
    operator = getattr(get_gateway().jvm, f"{_EMBEDDED}.EmbeddedPythonCoProcessOperator")(
        operator_configuration(j_first.getExecutionEnvironment(), python_in),
        _create_j_data_stream_python_function_info(function, UserDefinedDataStreamFunction.CO_PROCESS),
        j_first.getTransformation().getOutputType(), j_second.getTransformation().getOutputType(), j_output_type)
    return DataStream(j_first.connect(j_second).transform("Co-Process", j_output_type, operator))
