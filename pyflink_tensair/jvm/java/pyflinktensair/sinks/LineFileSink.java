package pyflinktensair.sinks;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import org.apache.flink.types.Row;

/**
 * Appends every record to {@code folder/prefix-<subtask>.jsonl}, one line each, so that the job's
 * driver can follow the file while the job runs (no Python crossing per record). A string is
 * written as it is; a {@code Row} (with the field names given) as a JSON object. Each line is
 * flushed at once, so that a TaskManager killed loses none already written (a flush per line
 * costs a serving job about 7% of its throughput, docs/measurements.md). Exactly once across
 * restores, unless told otherwise: a restored job first cuts the file back to its length at the
 * checkpoint (FolderSink); at least once keeps what came after it (a log of what the job did).
 */
public final class LineFileSink extends FolderSink<Object> {

    private static final long serialVersionUID = 1L;
    private final String[] fields;
    private final boolean exactlyOnce;

    public LineFileSink(String folder, String prefix, boolean exactlyOnce) {
        this(folder, prefix, null, exactlyOnce);
    }

    public LineFileSink(String folder, String prefix, String[] fields, boolean exactlyOnce) {
        super(folder, prefix);
        this.fields = fields;
        this.exactlyOnce = exactlyOnce;
    }

    @Override
    boolean exactlyOnce() {
        return exactlyOnce;
    }

    @Override
    String name(int subtask) {
        return prefix + "-" + subtask + ".jsonl";
    }

    @Override
    void rollBack(Path dir, String name, long at) throws IOException {
        Path file = dir.resolve(name);
        if (Files.exists(file) && Files.size(file) > at) {
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
                channel.truncate(at);
            }
        }
    }

    @Override
    Writer<Object> open(Path dir, int subtask, long at) throws IOException {
        FileChannel channel = FileChannel.open(dir.resolve(name(subtask)), StandardOpenOption.CREATE,
                StandardOpenOption.WRITE, StandardOpenOption.APPEND);
        BufferedWriter out = new BufferedWriter(Channels.newWriter(channel, StandardCharsets.UTF_8));
        StringBuilder line = new StringBuilder();
        return new Writer<Object>(name(subtask)) {
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
            long position() throws IOException {
                return channel.size();
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
