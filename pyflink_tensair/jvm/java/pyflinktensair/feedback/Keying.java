package pyflinktensair.feedback;

import java.util.Collections;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * Gives records the key of the replica they are for, on the JVM: {@code Row(key, record)}, the
 * shape PyFlink's {@code key_by} produces, so a Python keyed function reads them unchanged.
 *
 * <p>Doing this in Java spares every mini-batch and every gradient a round trip through a Python
 * worker (two copies of megabytes each) and keeps the loop's fan-out off the replicas' Python
 * workers, where it waited behind training steps.
 */
public final class Keying {

    static final int KIND_OFFSET = FeedbackSource.KIND_OFFSET;
    static final byte KIND_BATCH = 1;
    static final byte KIND_DEAD_LETTER = 10;
    static final byte[] MAGIC = {'T', 'S', 'N', 'R'};

    private Keying() {}

    /**
     * {@code keys[r]}: the smallest int key that Flink routes to subtask {@code r} of a keyed
     * operator with {@code parallelism} subtasks, as {@code Row(key)} (the key PyFlink's
     * {@code key_by} and {@link #RoundRobin} give). A job and its restore with another replica
     * count both find the keys here.
     */
    public static int[] pinnedKeys(int parallelism, int maxParallelism) {
        if (parallelism < 1 || parallelism > maxParallelism) {
            throw new IllegalArgumentException("parallelism must be in [1, " + maxParallelism + "], got " + parallelism);
        }
        int[] keys = new int[parallelism];
        java.util.Arrays.fill(keys, -1);
        int found = 0;
        for (int candidate = 0; found < parallelism; candidate++) {
            int subtask = org.apache.flink.runtime.state.KeyGroupRangeAssignment.assignKeyToParallelOperator(
                    Row.of(candidate), maxParallelism, parallelism);
            if (keys[subtask] < 0) {
                keys[subtask] = candidate;
                found++;
            }
        }
        return keys;
    }

    /**
     * Deals mini-batches round-robin to {@code keys}; subtask s starts at replica s. Where it is
     * in the deal is checkpointed, so a restored job deals the replayed batches as before.
     */
    public static final class RoundRobin extends RichMapFunction<byte[], Row> implements CheckpointedFunction {
        private static final long serialVersionUID = 1L;
        private final int[] keys;
        private int next;
        private transient ListState<Integer> position;
        private transient Integer restored;

        public RoundRobin(int[] keys) {
            this.keys = keys.clone();
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            position = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("next", Integer.class));
            if (context.isRestored()) {
                for (Integer value : position.get()) {
                    restored = value;
                }
            }
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            position.update(Collections.singletonList(next));
        }

        @Override
        public void open(OpenContext context) {
            next = restored != null ? restored % keys.length
                    : getRuntimeContext().getTaskInfo().getIndexOfThisSubtask() % keys.length;
        }

        @Override
        public Row map(byte[] record) {
            boolean tensair = isTensairRecord(record);
            if (tensair && record[KIND_OFFSET] != KIND_BATCH && record[KIND_OFFSET] != KIND_DEAD_LETTER) {
                throw new IllegalArgumentException("the batch stream carried a pyflink_tensair record of kind "
                        + record[KIND_OFFSET] + ", not a mini-batch (kind " + KIND_BATCH + ")");
            }
            Row row = Row.of(keys[next], record);
            // A dead letter, or bytes that are no record at all, go to the replica whose turn it is
            // (which reports them) without taking the turn: the batches are dealt as if they were
            // not there. Anything else with our prefix is a batch; the replica checks the rest.
            if (tensair && record[KIND_OFFSET] == KIND_BATCH) {
                next = (next + 1) % keys.length;
            }
            return row;
        }
    }

    /**
     * Copies each message of feedback source subtask s to every replica but s. Chained to the
     * source: sink s, hence source s, carries only replica s's messages.
     */
    public static final class ToPeers extends RichFlatMapFunction<byte[], Row> {
        private static final long serialVersionUID = 1L;
        private final int[] keys;
        private int sender;

        public ToPeers(int[] keys) {
            this.keys = keys.clone();
        }

        @Override
        public void open(OpenContext context) {
            sender = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        }

        @Override
        public void flatMap(byte[] record, Collector<Row> out) {
            for (int replica = 0; replica < keys.length; replica++) {
                if (replica != sender) {
                    out.collect(Row.of(keys[replica], record));
                }
            }
        }
    }

    /** Copies each record to every replica (a parameter server's broadcast). */
    public static final class ToAll extends RichFlatMapFunction<byte[], Row> {
        private static final long serialVersionUID = 1L;
        private final int[] keys;

        public ToAll(int[] keys) {
            this.keys = keys.clone();
        }

        @Override
        public void flatMap(byte[] record, Collector<Row> out) {
            for (int key : keys) {
                out.collect(Row.of(key, record));
            }
        }
    }

    static boolean isTensairRecord(byte[] record) {
        if (record.length <= KIND_OFFSET) {
            return false;
        }
        for (int i = 0; i < MAGIC.length; i++) {
            if (record[i] != MAGIC[i]) {
                return false;
            }
        }
        return true;
    }

    /** {@code Row(0, record)} for records of any type: one key for an operator that must see every record. */
    public static final class OneKey<T> implements org.apache.flink.api.common.functions.MapFunction<T, Row> {
        private static final long serialVersionUID = 1L;

        @Override
        public Row map(T record) {
            return Row.of(0, record);
        }
    }
}
