package pyflinktensair.sinks;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.types.Row;

/**
 * Appends every record to {@code folder/prefix-<subtask>.jsonl}, one line each, so that the job's
 * driver can follow the file while the job runs (no Python crossing per record). A string is
 * written as it is; a {@code Row} (with the field names given) as a JSON object. Each line is
 * flushed at once, so that a TaskManager killed loses none already written (a flush per line
 * costs a serving job about 7% of its throughput, docs/measurements.md).
 */
public final class LineFileSink extends FolderSink<Object> {

    private static final long serialVersionUID = 1L;
    private final String[] fields;

    public LineFileSink(String folder, String prefix) {
        this(folder, prefix, null);
    }

    public LineFileSink(String folder, String prefix, String[] fields) {
        super(folder, prefix);
        this.fields = fields;
    }

    @Override
    SinkWriter<Object> createWriter(Path dir, int subtask) throws IOException {
        BufferedWriter out = Files.newBufferedWriter(dir.resolve(prefix + "-" + subtask + ".jsonl"),
                StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        StringBuilder line = new StringBuilder();
        return new SinkWriter<Object>() {
            @Override
            public void write(Object record, Context ctx) throws IOException {
                if (fields != null && record instanceof Row) {
                    line.setLength(0);
                    JsonText.row((Row) record, fields, line);
                    out.append(line);
                } else {
                    out.write(String.valueOf(record));
                }
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
