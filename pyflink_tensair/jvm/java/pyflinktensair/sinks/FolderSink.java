package pyflinktensair.sinks;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.ByteArrayInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Collection;
import java.util.Collections;
import java.util.List;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.StatefulSinkWriter;
import org.apache.flink.api.connector.sink2.SupportsWriterState;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * A sink whose subtask {@code s} writes files named {@code prefix-s...} into {@code folder}, exactly
 * once across restores: a checkpoint holds how far each subtask had written (its {@link Position});
 * a job restored from it first rolls each file back to there (what came after will be written again
 * by the replay), and a job restarted without a checkpoint rolls its files back to nothing. Readers
 * that follow the files while the job runs may see lines that a failover takes back; what is there
 * when the job has finished is each record once. The files must be where a restarted subtask finds
 * them (one machine, or a file system the TaskManagers share).
 */
abstract class FolderSink<T> implements Sink<T>, SupportsWriterState<T, FolderSink.Position> {

    private static final long serialVersionUID = 1L;

    private final String folder;
    protected final String prefix;

    FolderSink(String folder, String prefix) {
        this.folder = folder;
        this.prefix = prefix;
    }

    /** How far the writer of file (or file family) {@code name} had written at a checkpoint. */
    static final class Position {
        final String name;
        final long at;

        Position(String name, long at) {
            this.name = name;
            this.at = at;
        }
    }

    /** What a subtask writes: records, and how far it has written. */
    abstract static class Writer<T> implements StatefulSinkWriter<T, Position> {
        private final String name;

        Writer(String name) {
            this.name = name;
        }

        /** How far it has written, everything up to there flushed. */
        abstract long position() throws IOException;

        @Override
        public final List<Position> snapshotState(long checkpointId) throws IOException {
            return Collections.singletonList(new Position(name, position()));
        }
    }

    /** The name of subtask {@code subtask}'s file (or file family), as positions name it. */
    abstract String name(int subtask);

    /** Takes back what file (or file family) {@code name} holds beyond {@code at}. */
    abstract void rollBack(Path dir, String name, long at) throws IOException;

    /** Whether a restore takes back what was written after its checkpoint (else it is kept, and
     * what the replay makes is added after it: at least once, for logs of what the job did). */
    boolean exactlyOnce() {
        return true;
    }

    /** A writer of subtask {@code subtask} that goes on from {@code at}. */
    abstract Writer<T> open(Path dir, int subtask, long at) throws IOException;

    @Override
    public final StatefulSinkWriter<T, Position> createWriter(WriterInitContext context) throws IOException {
        return restoreWriter(context, Collections.emptyList());
    }

    @Override
    public final StatefulSinkWriter<T, Position> restoreWriter(WriterInitContext context, Collection<Position> recovered)
            throws IOException {
        Path dir = Paths.get(folder);
        Files.createDirectories(dir);
        int subtask = context.getTaskInfo().getIndexOfThisSubtask();
        if (!exactlyOnce()) {
            return open(dir, subtask, -1);
        }
        String mine = name(subtask);
        boolean restarted = context.getRestoredCheckpointId().isPresent() || context.getTaskInfo().getAttemptNumber() > 0;
        long at = restarted ? 0 : -1;  // -1: a first start goes on from whatever is there
        for (Position position : recovered) {  // a rescaled job hands a removed subtask's positions to another
            rollBack(dir, position.name, position.at);
            if (position.name.equals(mine)) {
                at = position.at;
            }
        }
        if (at == 0) {
            rollBack(dir, mine, 0);
        }
        return open(dir, subtask, at);
    }

    @Override
    public final SimpleVersionedSerializer<Position> getWriterStateSerializer() {
        return new SimpleVersionedSerializer<Position>() {
            @Override
            public int getVersion() {
                return 1;
            }

            @Override
            public byte[] serialize(Position position) throws IOException {
                ByteArrayOutputStream bytes = new ByteArrayOutputStream();
                try (DataOutputStream out = new DataOutputStream(bytes)) {
                    out.writeUTF(position.name);
                    out.writeLong(position.at);
                }
                return bytes.toByteArray();
            }

            @Override
            public Position deserialize(int version, byte[] serialized) throws IOException {
                try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(serialized))) {
                    return new Position(in.readUTF(), in.readLong());
                }
            }
        };
    }
}
