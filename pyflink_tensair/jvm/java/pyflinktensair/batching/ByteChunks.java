package pyflinktensair.batching;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;

import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;

/**
 * {@link RecordChunks} of byte records (PyFlink's pickled Python objects), each chunk one byte
 * record that {@code pyflink_tensair.flink.chunk_batchers.split_chunk} reads: little-endian
 * {@code int64 n}, {@code int64} records before it, {@code int32 k}, then {@code k} times an
 * {@code int32} length and the record's bytes.
 */
public final class ByteChunks extends RecordChunks<byte[], byte[]> {

    private static final long serialVersionUID = 1L;

    public ByteChunks(int size, long maxWaitMs) {
        super(size, maxWaitMs, PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO);
    }

    @Override
    protected byte[] empty() {
        return new byte[0];
    }

    @Override
    protected byte[] chunk(long number, long before, List<byte[]> records) {
        int bytes = 0;
        for (byte[] record : records) {
            bytes += record.length;
        }
        ByteBuffer out = ByteBuffer.allocate(8 + 8 + 4 + 4 * records.size() + bytes).order(ByteOrder.LITTLE_ENDIAN);
        out.putLong(number).putLong(before).putInt(records.size());
        for (byte[] record : records) {
            out.putInt(record.length).put(record);
        }
        return out.array();
    }
}
