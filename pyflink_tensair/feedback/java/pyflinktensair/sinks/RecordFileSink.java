package pyflinktensair.sinks;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

import org.apache.flink.api.connector.sink2.SinkWriter;

/**
 * Writes every record to its own file {@code folder/prefix-<subtask>-<n>.bin} (n = 000000, ...),
 * through a temporary file renamed into place, so a reader never sees half a record.
 */
public final class RecordFileSink extends FolderSink<byte[]> {

    private static final long serialVersionUID = 1L;

    public RecordFileSink(String folder, String prefix) {
        super(folder, prefix);
    }

    @Override
    SinkWriter<byte[]> createWriter(Path dir, int subtask) throws IOException {
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
