package pyflinktensair.feedback;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;

/**
 * The tail of a feedback loop: subtask i puts every record into the queue of loop channel i.
 *
 * <p>Or the tail of a relay ({@link #relay}): a stream handed to a {@link FeedbackSource} in the
 * same slot, so that the operators after the source get their checkpoint barrier when the
 * checkpoint is triggered, not after every record queued before the sink's barrier. The records
 * in the channel are in no checkpoint: a relay is for streams whose reader can miss some (model
 * updates: a server that misses a delta waits for the next snapshot).
 */
public final class FeedbackSink implements Sink<byte[]> {

    private static final long serialVersionUID = 1L;

    private final String loopId;
    private final boolean relay;

    public FeedbackSink(String loopId) {
        this(loopId, false);
    }

    private FeedbackSink(String loopId, boolean relay) {
        this.loopId = loopId;
        this.relay = relay;
    }

    /** The tail of relay {@code relayId}; its head is {@link FeedbackSource#relay}. */
    public static FeedbackSink relay(String relayId) {
        return new FeedbackSink(relayId, true);
    }

    @Override
    public SinkWriter<byte[]> createWriter(WriterInitContext context) {
        int subtask = context.getTaskInfo().getIndexOfThisSubtask();
        int attempt = context.getTaskInfo().getAttemptNumber();
        FeedbackQueues.Channel channel;
        if (relay) {
            channel = FeedbackQueues.relayChannel(loopId, subtask);
            channel.reopen(); // an earlier attempt's records came after the checkpoint this one restores
        } else {
            channel = FeedbackQueues.channel(loopId, subtask, attempt);
        }
        return new SinkWriter<byte[]>() {
            @Override
            public void write(byte[] record, Context ctx) {
                channel.put(record);
            }

            @Override
            public void flush(boolean endOfInput) {
                if (endOfInput && relay) {
                    channel.close();
                }
            }

            @Override
            public void close() {}
        };
    }
}
