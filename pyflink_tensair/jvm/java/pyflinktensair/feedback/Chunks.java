package pyflinktensair.feedback;

import java.util.List;

import org.apache.flink.api.common.typeinfo.Types;

import pyflinktensair.batching.RecordChunks;

/**
 * {@link RecordChunks} of text records: chunk {@code n} is {@code [n, records before it,
 * record_1, ..., record_k]}, what {@code pyflink_tensair.flink.batching.chunked_batches}' functions
 * and the servers' {@code JsonEvents} read.
 */
public final class Chunks extends RecordChunks<String, String[]> {

    private static final long serialVersionUID = 1L;

    public Chunks(int size, long maxWaitMs) {
        super(size, maxWaitMs, Types.STRING);
    }

    @Override
    protected String empty() {
        return "";
    }

    @Override
    protected String[] chunk(long number, long before, List<String> records) {
        String[] chunk = new String[records.size() + 2];
        chunk[0] = Long.toString(number);
        chunk[1] = Long.toString(before);
        for (int i = 0; i < records.size(); i++) {
            chunk[i + 2] = records.get(i);
        }
        return chunk;
    }
}
