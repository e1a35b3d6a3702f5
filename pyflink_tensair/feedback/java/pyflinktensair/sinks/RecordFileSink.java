package pyflinktensair.sinks;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;

/**
 * Writes every record to its own file {@code folder/prefix-<subtask>-<n>.bin} (n = 000000, ...),
 * through a temporary file renamed into place, so a reader never sees half a record.
 */
public final class RecordFileSink implements Sink<byte[]> {

    private static final long serialVersionUID = 1L;

    private final String folder;
    private final String prefix;

    public RecordFileSink(String folder, String prefix) {
        this.folder = folder;
        this.prefix = prefix;
    }

    @Override
    public SinkWriter<byte[]> createWriter(WriterInitContext context) throws IOException {
        int subtask = context.getTaskInfo().getIndexOfThisSubtask();
        Path dir = Paths.get(folder);
        Files.createDirectories(dir);
        return new SinkWriter<byte[]>() {
            private int count;

            @Override
            public void write(byte[] record, Context ctx) throws IOException {
                Path target = dir.resolve(String.format("%s-%d-%06d.bin", prefix, subtask, count));
                Path partial = dir.resolve(target.getFileName() + ".tmp");
                Files.write(partial, record);
                Files.move(partial, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
                count++;
            }

            @Override
            public void flush(boolean endOfInput) {}

            @Override
            public void close() {}
        };
    }
}
