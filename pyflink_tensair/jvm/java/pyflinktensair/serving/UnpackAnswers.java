package pyflinktensair.serving;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * Turns a server's answer to one micro-batch (one record out of Python) into one {@code Row} per
 * event, on the JVM: a Python operator that emits a row per event pays a crossing per row, which
 * was a third to a half of a server's time (docs/measurements.md, 2026-12-04).
 *
 * <p>The record, little-endian, as {@code pyflink_tensair.online.serving.pack_answers} writes it:
 * {@code int32 n, int32 width, int64 version, int64 age_ms, int64 served_at_ms}, then {@code n}
 * {@code int32} key lengths, the keys' UTF-8 bytes one after another, and {@code n * width}
 * {@code float64} predictions, row after row. Each row out is
 * {@code (key, prediction as a list of width doubles, version, age_ms, served_at_ms)}, with the
 * timestamp of the record it came from. Stateless.
 */
public final class UnpackAnswers extends AbstractStreamOperator<Row> implements OneInputStreamOperator<byte[], Row> {

    private static final long serialVersionUID = 1L;
    private static final int HEADER = 4 + 4 + 8 + 8 + 8;

    @Override
    public void processElement(StreamRecord<byte[]> element) {
        byte[] data = element.getValue();
        ByteBuffer in = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
        if (data.length < HEADER) {
            throw new IllegalArgumentException("a packed answer of " + data.length + " bytes, shorter than its header");
        }
        int n = in.getInt();
        int width = in.getInt();
        if (n < 0 || width < 0 || HEADER + 4L * n > data.length) {
            throw new IllegalArgumentException("a packed answer of " + data.length + " bytes cannot hold " + n
                    + " rows of width " + width);
        }
        long version = in.getLong();
        long age = in.getLong();
        long servedAt = in.getLong();
        int[] lengths = new int[n];
        long keyBytes = 0;
        for (int i = 0; i < n; i++) {
            lengths[i] = in.getInt();
            if (lengths[i] < 0) {
                throw new IllegalArgumentException("a packed answer with a key of " + lengths[i] + " bytes");
            }
            keyBytes += lengths[i];
        }
        if (HEADER + 4L * n + keyBytes + Math.multiplyExact(8L * n, (long) width) != data.length) {
            throw new IllegalArgumentException("a packed answer of " + data.length + " bytes does not hold "
                    + n + " keys and " + n + " x " + width + " predictions");
        }
        int keyAt = in.position();
        in.position(keyAt + (int) keyBytes);
        boolean stamped = element.hasTimestamp();
        for (int i = 0; i < n; i++) {
            String key = new String(data, keyAt, lengths[i], StandardCharsets.UTF_8);
            keyAt += lengths[i];
            List<Double> prediction = new ArrayList<>(width);
            for (int j = 0; j < width; j++) {
                prediction.add(in.getDouble());
            }
            Row row = Row.of(key, prediction, version, age, servedAt);
            output.collect(stamped ? new StreamRecord<>(row, element.getTimestamp()) : new StreamRecord<>(row));
        }
    }
}
