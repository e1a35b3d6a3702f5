package pyflinktensair.feedback;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * The head of a feedback loop: subtask i emits what feedback sink subtask i received, in order.
 *
 * <p>It ends after relaying the record whose kind byte (offset {@link #KIND_OFFSET} of the
 * pyflink_tensair wire format) is {@link #KIND_DONE}: the replica that feeds sink i sends that
 * marker last. Its watermark is at the end of time from the start, so the loop never holds back
 * the event time of the replicas, whose end-of-input timer is an event-time timer.
 *
 * <p>The head of a relay ({@link #relay}) relays every record and ends once its sink's input
 * has ended and the channel is empty.
 */
public final class FeedbackSource implements Source<byte[], FeedbackSource.Split, Integer> {

    private static final long serialVersionUID = 1L;
    static final int KIND_OFFSET = 5;
    static final byte KIND_DONE = 3;

    private final String loopId;
    private final boolean relay;

    public FeedbackSource(String loopId) {
        this(loopId, false);
    }

    private FeedbackSource(String loopId, boolean relay) {
        this.loopId = loopId;
        this.relay = relay;
    }

    /** The head of relay {@code relayId}; its tail is {@link FeedbackSink#relay}. */
    public static FeedbackSource relay(String relayId) {
        return new FeedbackSource(relayId, true);
    }

    /** The watermark strategy to add this source with: watermarks never hold the loop back. */
    public static WatermarkStrategy<byte[]> watermarkStrategy() {
        return WatermarkStrategy.forGenerator(ctx -> new EndOfTimeWatermarks());
    }

    @Override
    public Boundedness getBoundedness() {
        return Boundedness.BOUNDED;
    }

    @Override
    public SourceReader<byte[], Split> createReader(SourceReaderContext context) {
        return new Reader(loopId, context.getIndexOfSubtask(), attemptNumber(context), relay);
    }

    @Override
    public SplitEnumerator<Split, Integer> createEnumerator(SplitEnumeratorContext<Split> context) {
        return new NoSplits();
    }

    @Override
    public SplitEnumerator<Split, Integer> restoreEnumerator(SplitEnumeratorContext<Split> context, Integer checkpoint) {
        return new NoSplits();
    }

    @Override
    public SimpleVersionedSerializer<Split> getSplitSerializer() {
        return new SplitSerializer();
    }

    @Override
    public SimpleVersionedSerializer<Integer> getEnumeratorCheckpointSerializer() {
        return new IntSerializer();
    }

    /**
     * The task's attempt number, which the reader's context does not offer: the metric group
     * carries it as a scope variable (the sink's context has it as {@code TaskInfo}).
     */
    static int attemptNumber(SourceReaderContext context) {
        String attempt = context.metricGroup().getAllVariables().get("<task_attempt_num>");
        if (attempt == null) {
            throw new IllegalStateException("the source reader's metric group has no <task_attempt_num>");
        }
        return Integer.parseInt(attempt);
    }

    static boolean isDone(byte[] record) {
        return record.length > KIND_OFFSET && record[KIND_OFFSET] == KIND_DONE;
    }

    /** Drains one channel; never blocks the task thread. */
    static final class Reader implements SourceReader<byte[], Split> {
        private final String loopId;
        private final int subtask;
        private final int attempt;
        private final boolean relay;
        private final FeedbackQueues.Channel channel;
        private boolean ended;

        Reader(String loopId, int subtask, int attempt, boolean relay) {
            this.loopId = loopId;
            this.subtask = subtask;
            this.attempt = attempt;
            this.relay = relay;
            this.channel = relay ? FeedbackQueues.relayChannel(loopId, subtask)
                                 : FeedbackQueues.channel(loopId, subtask, attempt);
        }

        @Override
        public void start() {}

        @Override
        public InputStatus pollNext(ReaderOutput<byte[]> output) {
            if (ended) {
                return InputStatus.END_OF_INPUT;
            }
            byte[] record = channel.poll();
            if (record == null && relay && channel.isClosed()) {
                record = channel.poll(); // a record put just before the close
                if (record == null) {
                    ended = true;
                    return InputStatus.END_OF_INPUT;
                }
            }
            if (record == null) {
                return InputStatus.NOTHING_AVAILABLE;
            }
            output.collect(record);
            if (!relay && isDone(record)) {
                ended = true;
                return InputStatus.END_OF_INPUT;
            }
            return InputStatus.MORE_AVAILABLE;
        }

        @Override
        public CompletableFuture<Void> isAvailable() {
            return ended ? CompletableFuture.completedFuture(null) : channel.availability();
        }

        @Override
        public List<Split> snapshotState(long checkpointId) {
            return Collections.emptyList();
        }

        @Override
        public void addSplits(List<Split> splits) {}

        @Override
        public void notifyNoMoreSplits() {}

        @Override
        public void close() {
            if (ended && !relay) { // a relay's channel stays for a sink or source that restarts
                FeedbackQueues.release(loopId, subtask, attempt);
            }
        }
    }

    /** The channel is chosen by subtask index, so the enumerator has nothing to hand out. */
    static final class NoSplits implements SplitEnumerator<Split, Integer> {
        @Override
        public void start() {}

        @Override
        public void handleSplitRequest(int subtaskId, String requesterHostname) {}

        @Override
        public void addSplitsBack(List<Split> splits, int subtaskId) {}

        @Override
        public void addReader(int subtaskId) {}

        @Override
        public Integer snapshotState(long checkpointId) {
            return 0;
        }

        @Override
        public void close() {}
    }

    /** Required by the Source API; never instantiated by this source. */
    public static final class Split implements SourceSplit {
        private final String id;

        public Split(String id) {
            this.id = id;
        }

        @Override
        public String splitId() {
            return id;
        }
    }

    static final class SplitSerializer implements SimpleVersionedSerializer<Split> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(Split split) {
            return split.splitId().getBytes(StandardCharsets.UTF_8);
        }

        @Override
        public Split deserialize(int version, byte[] serialized) {
            return new Split(new String(serialized, StandardCharsets.UTF_8));
        }
    }

    static final class IntSerializer implements SimpleVersionedSerializer<Integer> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(Integer value) throws IOException {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            new DataOutputStream(bytes).writeInt(value);
            return bytes.toByteArray();
        }

        @Override
        public Integer deserialize(int version, byte[] serialized) throws IOException {
            return new DataInputStream(new ByteArrayInputStream(serialized)).readInt();
        }
    }

    /**
     * Drops every record: the edge it makes (e.g. from this source to a relay's readers) puts
     * two parts of a job into one pipelined region, as co-location requires, and carries only
     * this source's checkpoint barriers, which it emits when a checkpoint is triggered.
     */
    public static final class Nothing implements FilterFunction<byte[]> {
        private static final long serialVersionUID = 1L;

        @Override
        public boolean filter(byte[] record) {
            return false;
        }
    }

    /** Emits the end-of-time watermark, so this input never holds back downstream event time. */
    static final class EndOfTimeWatermarks implements WatermarkGenerator<byte[]> {
        @Override
        public void onEvent(byte[] event, long eventTimestamp, WatermarkOutput output) {
            output.emitWatermark(new Watermark(Long.MAX_VALUE));
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput output) {
            output.emitWatermark(new Watermark(Long.MAX_VALUE));
        }
    }
}
