package pyflinktensair.checkpoint;

import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

import java.io.Serializable;

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
