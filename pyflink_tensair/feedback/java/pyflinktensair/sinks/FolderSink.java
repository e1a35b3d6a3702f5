package pyflinktensair.sinks;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;

/** A sink whose subtask {@code s} writes files named {@code prefix-s...} into {@code folder}. */
abstract class FolderSink<T> implements Sink<T> {

    private static final long serialVersionUID = 1L;

    private final String folder;
    protected final String prefix;

    FolderSink(String folder, String prefix) {
        this.folder = folder;
        this.prefix = prefix;
    }

    @Override
    public final SinkWriter<T> createWriter(WriterInitContext context) throws IOException {
        Path dir = Paths.get(folder);
        Files.createDirectories(dir);
        return createWriter(dir, context.getTaskInfo().getIndexOfThisSubtask());
    }

    abstract SinkWriter<T> createWriter(Path dir, int subtask) throws IOException;
}
