package pyflinktensair.batching;

import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.BoundedOneInput;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;

/**
 * An operator that groups records and sends each group once it is full, once its first record has
 * waited {@code maxWaitMs} (when above 0), and at the end of the input: the shared part of
 * {@code Chunks}, {@link ByteChunks} and {@link ExampleBatches}. A subclass calls {@link #pending}
 * after adding a record; it says what a group is ({@link #size}) and how it goes out ({@link #emit}).
 */
public abstract class Grouping<IN, OUT> extends AbstractStreamOperator<OUT>
        implements OneInputStreamOperator<IN, OUT>, BoundedOneInput {

    private static final long serialVersionUID = 1L;
    private final int groupSize;
    private final long maxWaitMs;
    private transient long deadline = -1;

    protected Grouping(int groupSize, long maxWaitMs) {
        if (groupSize < 1 || maxWaitMs < 0) {
            throw new IllegalArgumentException("need a group size >= 1 and maxWaitMs >= 0, not " + groupSize + ", " + maxWaitMs);
        }
        this.groupSize = groupSize;
        this.maxWaitMs = maxWaitMs;
    }

    /** The records waiting in the group. */
    protected abstract int size();

    /** Sends the group on and empties it. */
    protected abstract void emit() throws Exception;

    @Override
    public void open() throws Exception {
        super.open();
        deadline = -1;
        if (size() > 0) {
            schedule();  // timers are not in checkpoints: a restored partial group needs its own
        }
    }

    /** After a record joined the group: sends a full group, or starts the wait of a new one. */
    protected void pending() throws Exception {
        if (size() >= groupSize) {
            send();
        } else if (deadline < 0) {
            schedule();
        }
    }

    private void send() throws Exception {
        deadline = -1;
        emit();
    }

    private void schedule() {
        if (maxWaitMs <= 0) {
            return;
        }
        long due = getProcessingTimeService().getCurrentProcessingTime() + maxWaitMs;
        deadline = due;
        getProcessingTimeService().registerTimer(due, time -> {
            if (size() > 0 && deadline == due) {
                send();
            }
        });
    }

    /**
     * The end of event time (a bounded input's last watermark, which comes before {@link #endInput})
     * takes the pending records out first: operators behind may end on it (the replicas do).
     */
    @Override
    public void processWatermark(Watermark mark) throws Exception {
        if (mark.getTimestamp() == Long.MAX_VALUE && size() > 0) {
            send();
        }
        super.processWatermark(mark);
    }

    @Override
    public void endInput() throws Exception {
        if (size() > 0) {
            send();
        }
    }
}
