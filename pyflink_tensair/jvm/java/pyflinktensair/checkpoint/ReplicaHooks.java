package pyflinktensair.checkpoint;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.execution.SuppressRestartsException;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

import pyflinktensair.feedback.Keying;

import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Collections;

/**
 * What both replica operators (process mode, {@link ReplicaOperator}; thread mode, {@link
 * EmbeddedReplicaOperator}) add to PyFlink's keyed co-process operator: the open and "snapshot
 * now" records for the subtask's own key, and the gauge of how long the last checkpoint paused
 * the replica. Each subtask hosts exactly one key, {@code keys[subtask]}.
 *
 * <p>A job restored with another replica count (a rescale) opens differently: first one "adopt"
 * record under each old replica's key whose key group this subtask now holds (the Python function
 * reads that replica's state under its key), then the open record, which names the old count.
 */
public final class ReplicaHooks implements Serializable {

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
    final byte[] adoptMarker;
    /** Whether the replicas can merge their state into another count (not synchronous SGD's). */
    final boolean rescalable;
    private transient volatile long lastPauseMs;
    /** The replica count of the checkpoint this job resumed from, if it differs; else 0. */
    private transient int oldCount;

    ReplicaHooks(int[] keys, byte[] snapshotMarker, byte[] openMarker, byte[] adoptMarker, boolean rescalable) {
        this.keys = keys.clone();
        this.snapshotMarker = snapshotMarker.clone();
        this.openMarker = openMarker.clone();
        this.adoptMarker = adoptMarker.clone();
        this.rescalable = rescalable;
    }

    /**
     * Keeps the replica count in the checkpoint (union operator state: every subtask of a restored
     * job sees every old subtask's entry) and notes a restore made with another count: the new
     * replicas then adopt the old ones' state when they open. Synchronous replicas cannot (their
     * steps in flight would be lost), so such a restore fails at once instead of restarting.
     */
    void checkReplicaCount(StateInitializationContext context) throws Exception {
        ListState<Integer> counts = context.getOperatorStateStore()
                .getUnionListState(new ListStateDescriptor<>("tensair-replica-count", Integer.class));
        oldCount = 0;
        if (context.isRestored()) {
            for (Integer count : counts.get()) {
                if (count != keys.length && !rescalable) {
                    throw new SuppressRestartsException(new IllegalStateException(
                            "this checkpoint or savepoint holds " + count + " replicas and the job asks for "
                            + keys.length + ": synchronous replicas (staleness_bound=0) resume with the replica "
                            + "count they were saved with (resume with --replicas " + count + ", or start a new "
                            + "job from an export of the model)"));
                }
                oldCount = count != keys.length ? count : 0;
            }
        }
        counts.update(Collections.singletonList(keys.length));
    }

    /**
     * Once the operator is open: the gauge, then the open record (the function restores); after a
     * rescale first the adopt records of the old replicas whose keys this subtask now holds.
     */
    void opened(MetricGroup group, int subtask, int maxParallelism, FirstInput input) throws Exception {
        // how long the replica stood still for the last checkpoint: its state written and committed
        group.addGroup("tensair").gauge("checkpoint_pause_ms", (Gauge<Long>) () -> lastPauseMs);
        if (oldCount == 0) {
            input.take(marker(subtask, openMarker));
            return;
        }
        int[] oldKeys = Keying.pinnedKeys(oldCount, maxParallelism);
        for (int old = 0; old < oldCount; old++) {
            int holder = KeyGroupRangeAssignment.assignKeyToParallelOperator(Row.of(oldKeys[old]), maxParallelism, keys.length);
            if (holder == subtask) {
                byte[] adopt = withMeta(adoptMarker, "{\"old_replica\":" + old + ",\"old_replicas\":" + oldCount + "}");
                input.take(new StreamRecord<>(Row.of(oldKeys[old], adopt)));
            }
        }
        input.take(new StreamRecord<>(Row.of(keys[subtask], withMeta(openMarker, "{\"old_replicas\":" + oldCount + "}"))));
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

    /**
     * {@code template} (a record of pyflink_tensair's wire format with no tensors, encoded in
     * Python) with {@code metaJson} as its meta: its magic, version and kind, then the header
     * length, the header, and zeros up to a multiple of 8 bytes ({@code core/wire.py}).
     */
    public static byte[] withMeta(byte[] template, String metaJson) {
        byte[] header = ("{\"meta\":" + metaJson + ",\"tensors\":[]}").getBytes(StandardCharsets.UTF_8);
        int prefix = 12;  // magic (4), version (1), kind (1), reserved (2), header length (4)
        int length = prefix + header.length;
        ByteBuffer record = ByteBuffer.allocate(length + (8 - length % 8) % 8).order(ByteOrder.LITTLE_ENDIAN);
        record.put(template, 0, 6).putShort((short) 0).putInt(header.length).put(header);
        return record.array();
    }
}
