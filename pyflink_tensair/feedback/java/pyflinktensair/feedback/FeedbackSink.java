package pyflinktensair.feedback;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;

/** The tail of a feedback loop: subtask i puts every record into the queue of loop channel i. */
public final class FeedbackSink implements Sink<byte[]> {

    private static final long serialVersionUID = 1L;

    private final String loopId;

    public FeedbackSink(String loopId) {
        this.loopId = loopId;
    }

    @Override
    public SinkWriter<byte[]> createWriter(WriterInitContext context) {
        int subtask = context.getTaskInfo().getIndexOfThisSubtask();
        int attempt = context.getTaskInfo().getAttemptNumber();
        FeedbackQueues.Channel channel = FeedbackQueues.channel(loopId, subtask, attempt);
        return new SinkWriter<byte[]>() {
            @Override
            public void write(byte[] record, Context ctx) {
                channel.put(record);
            }

            @Override
            public void flush(boolean endOfInput) {}

            @Override
            public void close() {}
        };
    }
}
