package pyflinktensair.checkpoint;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.execution.SuppressRestartsException;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

import java.io.Serializable;
import java.util.Collections;

/**
 * What both replica operators (process mode, {@link ReplicaOperator}; thread mode, {@link
 * EmbeddedReplicaOperator}) add to PyFlink's keyed co-process operator: the open and "snapshot
 * now" records for the subtask's own key, and the gauge of how long the last checkpoint paused
 * the replica. Each subtask hosts exactly one key, {@code keys[subtask]}.
 */
final class ReplicaHooks implements Serializable {

    private static final long serialVersionUID = 1L;

    /** An operator's first input, its key context set for the record. */
    interface FirstInput {
        void take(StreamRecord<Row> record) throws Exception;
    }

    /** What the operator itself does before a barrier (finish its bundle). */
    interface Step {
        void run() throws Exception;
    }

    final int[] keys;
    final byte[] snapshotMarker;
    final byte[] openMarker;
    private transient volatile long lastPauseMs;

    ReplicaHooks(int[] keys, byte[] snapshotMarker, byte[] openMarker) {
        this.keys = keys.clone();
        this.snapshotMarker = snapshotMarker.clone();
        this.openMarker = openMarker.clone();
    }

    /**
     * Keeps the replica count in the checkpoint (union operator state: every subtask of a restored
     * job sees every old subtask's entry), and refuses a restore made with another count: the
     * replicas' keys follow from the count, so the new replicas would find no state and train
     * from their starting weights while the old ones' state lay unread. Not a failure a restart
     * can mend, so the job fails at once instead of restarting.
     */
    void checkReplicaCount(StateInitializationContext context) throws Exception {
        ListState<Integer> counts = context.getOperatorStateStore()
                .getUnionListState(new ListStateDescriptor<>("tensair-replica-count", Integer.class));
        if (context.isRestored()) {
            for (Integer count : counts.get()) {
                if (count != keys.length) {
                    throw new SuppressRestartsException(new IllegalStateException(
                            "this checkpoint or savepoint holds " + count + " replicas and the job asks for "
                            + keys.length + ": a job resumes with the replica count it was saved with (changing it "
                            + "is not supported yet; start a new job from an export of the model instead)"));
                }
            }
        }
        counts.update(Collections.singletonList(keys.length));
    }

    /** Once the operator is open: the gauge, then the open record (the function restores). */
    void opened(MetricGroup group, int subtask, FirstInput input) throws Exception {
        // how long the replica stood still for the last checkpoint: its state written and committed
        group.addGroup("tensair").gauge("checkpoint_pause_ms", (Gauge<Long>) () -> lastPauseMs);
        input.take(marker(subtask, openMarker));
    }

    /** Before a barrier: the "snapshot now" record, then the operator's own step, timed. */
    void beforeBarrier(int subtask, FirstInput input, Step operatorStep) throws Exception {
        long began = System.nanoTime();
        input.take(marker(subtask, snapshotMarker));
        operatorStep.run();
        lastPauseMs = (System.nanoTime() - began) / 1_000_000;
    }

    private StreamRecord<Row> marker(int subtask, byte[] marker) {
        return new StreamRecord<>(Row.of(keys[subtask], marker));
    }
}
