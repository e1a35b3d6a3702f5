package pyflinktensair.batching;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

/**
 * Mini-batches of examples made on the JVM, each already in the wire format the replicas read:
 * no record crosses into Python (a batch crosses once, into its replica). Records are JSON text,
 * Rows or Tuples ({@link Example}); a record that is not an example of this stream becomes a dead
 * letter with its reason and its position (the records before it in this subtask), and takes no
 * place in a batch, as with {@code to_batches}' Python batcher.
 *
 * <p>Runs at any parallelism, each subtask batching what reaches it (chained to a parallel source,
 * one batcher per partition). Batch {@code n} of subtask {@code s} of {@code p} has id
 * {@code s + p * n}. The pending examples, the settled shape and the counts are operator state, so
 * a job restored from a checkpoint batches exactly the records it would have (restored with another
 * parallelism, the pending examples are merged). With {@code maxWaitMs} a partial batch also goes
 * out once its first example has waited that long; with {@code rate} each subtask sends at most
 * {@code rate / p} batches a second (it sleeps), stamping {@code scheduled_at} as {@code Pacer} does.
 */
public final class ExampleBatches extends Grouping<Object, byte[]> {

    private static final long serialVersionUID = 1L;
    private static final int PREVIEW = 120;
    private final int[] shape;
    private final int classes;
    private final double rate;
    private final String stage;
    private transient Example example;
    private transient Columns pending;
    private transient List<Columns> leftOver;
    private transient long count;
    private transient long seen;
    private transient double start;
    private transient ListState<byte[]> state;

    /**
     * @param shape the features' shape, or {@code null}: the first good example's
     * @param classes labels must be {@code 0 .. classes - 1}; 0: any number
     * @param rate batches a second over all subtasks; 0: unpaced
     * @param stage the dead letters' stage
     */
    public ExampleBatches(int batchSize, long maxWaitMs, int[] shape, int classes, double rate, String stage) {
        super(batchSize, maxWaitMs);
        if (classes < 0 || !(rate >= 0)) {
            throw new IllegalArgumentException("need classes >= 0 and rate >= 0, not " + classes + ", " + rate);
        }
        this.shape = shape == null ? null : shape.clone();
        this.classes = classes;
        this.rate = rate;
        this.stage = stage;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        state = context.getOperatorStateStore().getListState(
                new ListStateDescriptor<>("examples", PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
        example = new Example();
        pending = new Columns(shape, classes);
        leftOver = new ArrayList<>();
        start = Double.NaN;
        if (context.isRestored()) {
            for (byte[] saved : state.get()) {
                ByteBuffer in = ByteBuffer.wrap(saved).order(ByteOrder.LITTLE_ENDIAN);
                count = Math.max(count, in.getLong());
                seen += in.getLong();
                byte[] columns = new byte[in.remaining()];
                in.get(columns);
                if (!pending.restore(columns)) {  // another subtask's, of another shape (a rescale)
                    Columns other = new Columns(null, classes);
                    other.restore(columns);
                    leftOver.add(other);
                }
            }
        }
    }

    @Override
    public void open() throws Exception {
        super.open();
        for (Columns other : leftOver) {
            if (other.size > 0) {
                output.collect(new StreamRecord<>(other.batch(meta())));
                count++;
            }
        }
        leftOver.clear();
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        byte[] columns = pending.snapshot();
        ByteBuffer out = ByteBuffer.allocate(16 + columns.length).order(ByteOrder.LITTLE_ENDIAN);
        out.putLong(count).putLong(seen).put(columns);
        state.update(java.util.Collections.singletonList(out.array()));
    }

    @Override
    public void processElement(StreamRecord<Object> element) throws Exception {
        Object record = element.getValue();
        long position = seen++;
        try {
            example.read(record);
            pending.add(example);
        } catch (Example.Reject refused) {
            output.collect(new StreamRecord<>(WireRecords.deadLetter(refused.reason, refused.getMessage(), stage, position,
                    preview(record))));
            return;
        }
        pending();
    }

    @Override
    protected int size() {
        return pending.size;
    }

    @Override
    protected void emit() throws InterruptedException {
        String meta = meta();
        count++;
        output.collect(new StreamRecord<>(pending.batch(meta)));
    }

    /** Batch {@code count}'s meta, once it is due (paced). */
    private String meta() throws InterruptedException {
        int subtasks = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
        long id = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask() + (long) subtasks * count;
        if (rate <= 0) {
            return "{\"id\":" + id + "}";
        }
        double perSecond = rate / subtasks;
        double now = System.currentTimeMillis() / 1000.0;
        if (Double.isNaN(start)) {
            start = now - count / perSecond;  // paced from the first batch this run makes
        }
        double due = start + count / perSecond;
        if (due > now) {
            Thread.sleep((long) Math.ceil((due - now) * 1000));
        }
        return "{\"id\":" + id + ",\"scheduled_at\":" + due + "}";
    }

    private static String preview(Object record) {
        String text = record instanceof String ? "'" + record + "'" : String.valueOf(record);
        return text.length() <= PREVIEW ? text : text.substring(0, PREVIEW - 3) + "...";
    }
}
