package pyflinktensair.sinks;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import org.apache.flink.api.connector.sink2.SinkWriter;

/**
 * Appends every string to {@code folder/prefix-<subtask>.jsonl}, one line each, flushed at once so
 * that the job's driver can follow the file while the job runs (no Python crossing per record).
 */
public final class LineFileSink extends FolderSink<String> {

    private static final long serialVersionUID = 1L;

    public LineFileSink(String folder, String prefix) {
        super(folder, prefix);
    }

    @Override
    SinkWriter<String> createWriter(Path dir, int subtask) throws IOException {
        BufferedWriter out = Files.newBufferedWriter(dir.resolve(prefix + "-" + subtask + ".jsonl"),
                StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        return new SinkWriter<String>() {
            @Override
            public void write(String line, Context ctx) throws IOException {
                out.write(line);
                out.write('\n');
                out.flush();
            }

            @Override
            public void flush(boolean endOfInput) throws IOException {
                out.flush();
            }

            @Override
            public void close() throws IOException {
                out.close();
            }
        };
    }
}
