package pyflinktensair.batching;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

/**
 * Groups records into chunks of {@code size} on the JVM, so that they cross into Python once per
 * chunk instead of once per record (a record-at-a-time Python batcher spent 4-7 ms per record
 * inside Flink against 0.2 ms in a plain loop). Chunk {@code n} knows its number and the records
 * before it; the last one may be shorter, and so may one whose first record waited
 * {@code maxWaitMs}. The pending records and both counts are operator state, so a job restored
 * from a checkpoint chunks exactly the records it would have. Runs as one subtask. A subclass
 * says how a chunk is written ({@link #chunk}).
 */
public abstract class RecordChunks<T, OUT> extends Grouping<T, OUT> {

    private static final long serialVersionUID = 1L;
    private final TypeInformation<T> recordType;
    private transient List<T> pending;
    private transient long count;
    private transient long seen;
    private transient ListState<T> pendingState;
    private transient ListState<Long> countState;

    protected RecordChunks(int size, long maxWaitMs, TypeInformation<T> recordType) {
        super(size, maxWaitMs);
        this.recordType = recordType;
    }

    /** Chunk {@code number}, of {@code records} that come after {@code before} others. */
    protected abstract OUT chunk(long number, long before, List<T> records);

    /** What a record that is null counts as. */
    protected abstract T empty();

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        pendingState = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("pending", recordType));
        countState = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("count", Long.class));
        pending = new ArrayList<>();
        if (context.isRestored()) {
            for (T record : pendingState.get()) {
                pending.add(record);
            }
            List<Long> counts = new ArrayList<>();
            for (Long value : countState.get()) {
                counts.add(value);
            }
            if (counts.size() == 2) {
                count = counts.get(0);
                seen = counts.get(1);
            }
        }
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        pendingState.update(new ArrayList<>(pending));
        countState.update(Arrays.asList(count, seen));
    }

    @Override
    public void processElement(StreamRecord<T> element) throws Exception {
        T record = element.getValue();
        pending.add(record == null ? empty() : record);
        pending();
    }

    @Override
    protected int size() {
        return pending.size();
    }

    @Override
    protected void emit() {
        OUT out = chunk(count, seen, pending);
        count += 1;
        seen += pending.size();
        pending.clear();
        output.collect(new StreamRecord<>(out));
    }
}
