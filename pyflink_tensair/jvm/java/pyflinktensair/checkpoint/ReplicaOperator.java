package pyflinktensair.checkpoint;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.streaming.api.functions.python.DataStreamPythonFunctionInfo;
import org.apache.flink.streaming.api.operators.python.process.AbstractExternalDataStreamPythonFunctionOperator;
import org.apache.flink.streaming.api.operators.python.process.ExternalPythonKeyedCoProcessOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * PyFlink's keyed co-process operator (process mode) with two hooks for the replica it hosts:
 * a "snapshot now" record for the subtask's own key just before each checkpoint barrier leaves
 * (the Python function writes its state then, once per checkpoint instead of once per record;
 * the bundle that carries it finishes before the barrier, so the writes are in the checkpoint),
 * and an "open" record once the Python worker is up (the function restores its state then, and
 * re-sends what its peers may have lost).
 *
 * <p>Python functions have no snapshot hook of their own: this is the one place a checkpoint is
 * visible to them. Each subtask hosts exactly one key, {@code keys[subtask]}.
 */
public class ReplicaOperator<OUT> extends ExternalPythonKeyedCoProcessOperator<OUT> {

    private static final long serialVersionUID = 1L;

    private final ReplicaHooks hooks;

    public ReplicaOperator(
            Configuration config,
            DataStreamPythonFunctionInfo pythonFunctionInfo,
            TypeInformation<Row> inputTypeInfo1,
            TypeInformation<Row> inputTypeInfo2,
            TypeInformation<OUT> outputTypeInfo,
            int[] keys,
            byte[] snapshotMarker,
            byte[] openMarker,
            byte[] adoptMarker,
            boolean rescalable) {
        super(config, pythonFunctionInfo, inputTypeInfo1, inputTypeInfo2, outputTypeInfo);
        this.hooks = new ReplicaHooks(keys, snapshotMarker, openMarker, adoptMarker, rescalable);
    }

    @Override
    public void open() throws Exception {
        super.open();
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
        // the operator's own step finishes the bundle: the state writes land
        hooks.beforeBarrier(subtask(), this::takeMarker, () -> super.prepareSnapshotPreBarrier(checkpointId));
    }

    private int subtask() {
        return getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
    }

    private void takeMarker(StreamRecord<Row> record) throws Exception {
        setKeyContextElement1(record);
        processElement1(record);
    }

    @Override
    public <T> AbstractExternalDataStreamPythonFunctionOperator<T> copy(
            DataStreamPythonFunctionInfo pythonFunctionInfo, TypeInformation<T> outputTypeInfo) {
        return new ReplicaOperator<>(config, pythonFunctionInfo, getLeftInputType(), getRightInputType(),
                outputTypeInfo, hooks.keys, hooks.snapshotMarker, hooks.openMarker, hooks.adoptMarker, hooks.rescalable);
    }
}
