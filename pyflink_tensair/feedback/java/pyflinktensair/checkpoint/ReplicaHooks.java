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

    final int[] keys;
    final byte[] snapshotMarker;
    final byte[] openMarker;
    private transient volatile long lastPauseMs;

    ReplicaHooks(int[] keys, byte[] snapshotMarker, byte[] openMarker) {
        this.keys = keys.clone();
        this.snapshotMarker = snapshotMarker.clone();
        this.openMarker = openMarker.clone();
    }

    void registerGauge(MetricGroup group) {
        // how long the replica stood still for the last checkpoint: its state written and committed
        group.addGroup("tensair").gauge("checkpoint_pause_ms", (Gauge<Long>) () -> lastPauseMs);
    }

    StreamRecord<Row> marker(int subtask, byte[] marker) {
        return new StreamRecord<>(Row.of(keys[subtask], marker));
    }

    void pauseEnded(long beganNanos) {
        lastPauseMs = (System.nanoTime() - beganNanos) / 1_000_000;
    }
}
