package pyflinktensair.feedback;

import java.util.ArrayList;
import java.util.List;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.BoundedOneInput;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

/**
 * Groups text records into chunks of {@code size} on the JVM, so that they cross into Python once
 * per mini-batch instead of once per record (a record-at-a-time Python batcher spent 4-7 ms per
 * record inside Flink against 0.2 ms in a plain loop). Chunk {@code n} is
 * {@code [n, records before it, record_1, ..., record_size]}; the last one may be shorter, and with
 * {@code maxWaitMs} a partial chunk also goes out once its first record has waited that long (a slow
 * live stream still trains). The pending records and both counts are operator state, so a job
 * restored from a checkpoint chunks exactly the records it would have. Runs as one subtask.
 */
public final class Chunks extends AbstractStreamOperator<String[]>
        implements OneInputStreamOperator<String, String[]>, BoundedOneInput {

    private static final long serialVersionUID = 1L;
    private final int size;
    private final long maxWaitMs;
    private transient List<String> pending;
    private transient long count;
    private transient long seen;
    private transient long deadline;
    private transient ListState<String> pendingState;
    private transient ListState<Long> countState;

    public Chunks(int size, long maxWaitMs) {
        if (size < 1 || maxWaitMs < 0) {
            throw new IllegalArgumentException("need size >= 1 and maxWaitMs >= 0, not " + size + ", " + maxWaitMs);
        }
        this.size = size;
        this.maxWaitMs = maxWaitMs;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        pendingState = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("pending", String.class));
        countState = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("count", Long.class));
        pending = new ArrayList<>();
        count = 0;
        seen = 0;
        deadline = -1;
        if (context.isRestored()) {
            for (String record : pendingState.get()) {
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
    public void open() throws Exception {
        super.open();
        if (!pending.isEmpty()) {
            schedule(); // timers are not in checkpoints: a restored partial chunk needs its own
        }
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        pendingState.update(new ArrayList<>(pending));
        countState.update(java.util.Arrays.asList(count, seen));
    }

    @Override
    public void processElement(StreamRecord<String> element) {
        String record = element.getValue();
        pending.add(record == null ? "" : record);
        if (pending.size() >= size) {
            emit();
        } else if (deadline < 0) {
            schedule();
        }
    }

    private void schedule() {
        if (maxWaitMs <= 0) {
            return;
        }
        long due = getProcessingTimeService().getCurrentProcessingTime() + maxWaitMs;
        deadline = due;
        getProcessingTimeService().registerTimer(due, time -> {
            if (!pending.isEmpty() && deadline == due) {
                emit();
            }
        });
    }

    /**
     * The end of event time (a bounded input's last watermark, which comes before {@link #endInput})
     * takes the pending records out first: operators behind may end on it (the replicas do).
     */
    @Override
    public void processWatermark(org.apache.flink.streaming.api.watermark.Watermark mark) throws Exception {
        if (mark.getTimestamp() == Long.MAX_VALUE && !pending.isEmpty()) {
            emit();
        }
        super.processWatermark(mark);
    }

    @Override
    public void endInput() {
        if (!pending.isEmpty()) {
            emit();
        }
    }

    private void emit() {
        String[] chunk = new String[pending.size() + 2];
        chunk[0] = Long.toString(count);
        chunk[1] = Long.toString(seen);
        for (int i = 0; i < pending.size(); i++) {
            chunk[i + 2] = pending.get(i);
        }
        count += 1;
        seen += pending.size();
        pending.clear();
        deadline = -1;
        output.collect(new StreamRecord<>(chunk));
    }
}
