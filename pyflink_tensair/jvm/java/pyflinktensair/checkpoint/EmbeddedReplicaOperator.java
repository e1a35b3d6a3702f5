package pyflinktensair.checkpoint;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.streaming.api.functions.python.DataStreamPythonFunctionInfo;
import org.apache.flink.streaming.api.operators.python.embedded.AbstractEmbeddedDataStreamPythonFunctionOperator;
import org.apache.flink.streaming.api.operators.python.embedded.EmbeddedPythonKeyedCoProcessOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * {@link ReplicaOperator}'s hooks on PyFlink's keyed co-process operator in thread mode: the
 * replica's Python function runs in the TaskManager's JVM through PEMJA, called directly by the
 * task thread, so no record crosses a Beam bundle. Its configuration must name
 * {@code python.execution-mode: thread}; the rest of the job may stay in process mode.
 *
 * <p>A call into Python returns once the function has run and its state writes are done, so the
 * "snapshot now" record needs no bundle to finish before the barrier.
 */
public class EmbeddedReplicaOperator<K> extends EmbeddedPythonKeyedCoProcessOperator<K, Row, Row, Object> {

    private static final long serialVersionUID = 1L;

    private final ReplicaHooks hooks;
    private final TypeInformation<Row> firstInputType;
    private final TypeInformation<Row> secondInputType;

    @SuppressWarnings({"unchecked", "rawtypes"})
    public EmbeddedReplicaOperator(
            Configuration config,
            DataStreamPythonFunctionInfo pythonFunctionInfo,
            TypeInformation<Row> inputTypeInfo1,
            TypeInformation<Row> inputTypeInfo2,
            TypeInformation outputTypeInfo,
            int[] keys,
            byte[] snapshotMarker,
            byte[] openMarker,
            byte[] adoptMarker,
            boolean rescalable) {
        super(config, pythonFunctionInfo, inputTypeInfo1, inputTypeInfo2, outputTypeInfo);
        this.hooks = new ReplicaHooks(keys, snapshotMarker, openMarker, adoptMarker, rescalable);
        this.firstInputType = inputTypeInfo1;
        this.secondInputType = inputTypeInfo2;
    }

    @Override
    public void open() throws Exception {
        try {
            super.open();
        } catch (RuntimeException e) {
            throw explained(e);
        }
        hooks.opened(getMetricGroup(), subtask(), getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks(),
                this::takeMarker);
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        hooks.checkReplicaCount(context);
    }

    @Override
    public void prepareSnapshotPreBarrier(long checkpointId) throws Exception {
        hooks.beforeBarrier(subtask(), this::takeMarker, () -> super.prepareSnapshotPreBarrier(checkpointId));
    }

    /**
     * PEMJA loads its native library once per JVM; when each job ships its own copy of PEMJA's
     * classes (flink-python in the job's jars, not in the cluster's lib/), the second job's copy
     * cannot load it and PEMJA fails on a JDK-internal field. Say what to do instead.
     */
    private static RuntimeException explained(RuntimeException e) {
        for (Throwable cause = e; cause != null; cause = cause.getCause()) {
            if (cause instanceof NoSuchFieldException && "loadedLibraryNames".equals(cause.getMessage())) {
                return new IllegalStateException(
                        "the replicas' thread mode could not load PEMJA's native library: another job on this "
                                + "TaskManager loaded it with its own copy of flink-python. Put flink-python-*.jar "
                                + "(the pyflink package's opt/ folder) into the cluster's lib/ folder, or run the "
                                + "replicas in Python worker processes: TrainConfig(replica_execution='process'), "
                                + "--python-in processes",
                        e);
            }
        }
        return e;
    }

    private int subtask() {
        return getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
    }

    private void takeMarker(StreamRecord<Row> record) throws Exception {
        setKeyContextElement1(record);
        processElement1(record);
    }

    @Override
    @SuppressWarnings({"unchecked", "rawtypes"})
    public <T> AbstractEmbeddedDataStreamPythonFunctionOperator<T> copy(
            DataStreamPythonFunctionInfo pythonFunctionInfo, TypeInformation<T> outputTypeInfo) {
        return (AbstractEmbeddedDataStreamPythonFunctionOperator) new EmbeddedReplicaOperator<K>(
                config, pythonFunctionInfo, firstInputType, secondInputType, outputTypeInfo,
                hooks.keys, hooks.snapshotMarker, hooks.openMarker, hooks.adoptMarker, hooks.rescalable);
    }
}
