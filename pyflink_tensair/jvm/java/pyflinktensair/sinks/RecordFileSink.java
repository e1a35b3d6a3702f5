package pyflinktensair.sinks;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Writes every record to its own file {@code folder/prefix-<subtask>-<n>.bin} (n = 000000, ...),
 * through a temporary file renamed into place, so a reader never sees half a record. Exactly once
 * across restores: a restored job first deletes the files numbered from its count at the checkpoint
 * on (FolderSink).
 */
public final class RecordFileSink extends FolderSink<byte[]> {

    private static final long serialVersionUID = 1L;

    public RecordFileSink(String folder, String prefix) {
        super(folder, prefix);
    }

    @Override
    String name(int subtask) {
        return prefix + "-" + subtask;
    }

    @Override
    void rollBack(Path dir, String name, long at) throws IOException {
        Pattern numbered = Pattern.compile(Pattern.quote(name) + "-(\\d+)\\.bin(\\.tmp)?");
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, name + "-*")) {
            for (Path file : files) {
                Matcher match = numbered.matcher(file.getFileName().toString());
                if (match.matches() && Long.parseLong(match.group(1)) >= at) {
                    Files.deleteIfExists(file);
                }
            }
        }
    }

    @Override
    Writer<byte[]> open(Path dir, int subtask, long at) {
        return new Writer<byte[]>(name(subtask)) {
            private long count = Math.max(at, 0);

            @Override
            public void write(byte[] record, Context ctx) throws IOException {
                Path target = dir.resolve(String.format("%s-%06d.bin", name(subtask), count));
                Path partial = dir.resolve(target.getFileName() + ".tmp");
                Files.write(partial, record);
                Files.move(partial, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
                count++;
            }

            @Override
            long position() {
                return count;
            }

            @Override
            public void flush(boolean endOfInput) {}

            @Override
            public void close() {}
        };
    }
}
