package pyflinktensair.batching;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonGenerator;

/**
 * Records in {@code pyflink_tensair.core.wire}'s byte format, written on the JVM: a mini-batch
 * ({@code x}, and {@code y} when labelled) and a dead letter. The layout is the module docstring's:
 * {@code b"TSNR"}, version 1, kind, two zero bytes, the header's length (u32, little-endian), the
 * UTF-8 JSON header {@code {"meta": ..., "tensors": [...]}}, zero padding to a multiple of 8, then
 * the arrays, each at a multiple of 8 from the start of that data section.
 */
final class WireRecords {

    static final byte KIND_BATCH = 1;
    static final byte KIND_DEAD_LETTER = 10;
    private static final JsonFactory JSON = new JsonFactory();

    private WireRecords() {}

    static int padded(int n) {
        return (n + 7) & ~7;
    }

    /** A little-endian buffer for the arrays of a batch of {@code nbytes[i]} bytes each. */
    static ByteBuffer body(int... nbytes) {
        int total = 0;
        for (int n : nbytes) {
            total += padded(n);
        }
        return ByteBuffer.allocate(total).order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * A batch record: {@code x} float32 of {@code xShape} at offset 0 of {@code body}, and, when
     * {@code yDtype} is not null, {@code y} of {@code yShape} after it (padded). {@code meta}: the
     * meta object's JSON text.
     */
    static byte[] batch(String meta, int[] xShape, String yDtype, int[] yShape, byte[] body, int xBytes, int yBytes) {
        ByteArrayOutputStream header = new ByteArrayOutputStream(160);
        try (JsonGenerator g = JSON.createGenerator(header)) {
            g.writeStartObject();
            g.writeFieldName("meta");
            g.writeRawValue(meta);
            g.writeArrayFieldStart("tensors");
            tensor(g, "x", "<f4", xShape, 0, xBytes);
            if (yDtype != null) {
                tensor(g, "y", yDtype, yShape, padded(xBytes), yBytes);
            }
            g.writeEndArray();
            g.writeEndObject();
        } catch (IOException err) {
            throw new UncheckedIOException(err);
        }
        return record(KIND_BATCH, header.toByteArray(), body);
    }

    private static void tensor(JsonGenerator g, String name, String dtype, int[] shape, int offset, int nbytes)
            throws IOException {
        g.writeStartObject();
        g.writeStringField("name", name);
        g.writeStringField("dtype", dtype);
        g.writeArrayFieldStart("shape");
        for (int d : shape) {
            g.writeNumber(d);
        }
        g.writeEndArray();
        g.writeNumberField("offset", offset);
        g.writeNumberField("nbytes", nbytes);
        g.writeEndObject();
    }

    /** A dead letter of one record set aside by the batcher (what {@code wire.encode_dead_letter} writes). */
    static byte[] deadLetter(String reason, String detail, String stage, long position, String preview) {
        ByteArrayOutputStream header = new ByteArrayOutputStream(256);
        try (JsonGenerator g = JSON.createGenerator(header)) {
            g.writeStartObject();
            g.writeObjectFieldStart("meta");
            g.writeStringField("reason", reason);
            g.writeStringField("detail", detail.length() > 300 ? detail.substring(0, 300) : detail);
            g.writeStringField("what", "record");
            g.writeStringField("stage", stage);
            g.writeNumberField("position", position);
            g.writeStringField("preview", preview);
            g.writeNumberField("replica", -1);
            g.writeNumberField("time", 0.0);
            g.writeEndObject();
            g.writeArrayFieldStart("tensors");
            g.writeEndArray();
            g.writeEndObject();
        } catch (IOException err) {
            throw new UncheckedIOException(err);
        }
        return record(KIND_DEAD_LETTER, header.toByteArray(), new byte[0]);
    }

    private static byte[] record(byte kind, byte[] header, byte[] body) {
        int head = padded(12 + header.length);
        ByteBuffer out = ByteBuffer.allocate(head + body.length).order(ByteOrder.LITTLE_ENDIAN);
        out.put((byte) 'T').put((byte) 'S').put((byte) 'N').put((byte) 'R').put((byte) 1).put(kind).putShort((short) 0)
                .putInt(header.length).put(header);
        out.position(head);
        out.put(body);
        return out.array();
    }
}
