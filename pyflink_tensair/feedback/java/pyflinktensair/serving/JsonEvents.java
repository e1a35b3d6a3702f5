package pyflinktensair.serving;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

/**
 * Parses a chunk of JSON events ({@code {"id": ..., "x": [...]}}, what
 * {@code pyflink_tensair.online.serving.json_event} reads) on the JVM, so that a server gets the
 * micro-batch's keys and features as one byte record: parsing the JSON in Python was 40% of a
 * server's work per micro-batch (docs/measurements.md).
 *
 * <p>In: a chunk of {@code Chunks}, {@code [n, events before it, text, ...]}. Out, little-endian,
 * as {@code pyflink_tensair.online.serving.unpack_events} reads it: {@code int64 before},
 * {@code int32 good}, {@code int32 bad}, {@code int32 rank} and {@code rank} {@code int32} dims
 * (an event's features' shape), {@code good} {@code int32} key lengths and the keys' UTF-8 bytes
 * (the layout {@code UnpackAnswers} reads back, so the keys pass through Python untouched), then
 * {@code good * prod(dims)} {@code float32} features, then per bad event {@code int32} its index in
 * the chunk, its reason and its text (each an {@code int32} length and UTF-8 bytes).
 *
 * <p>An event is good when it is one JSON object whose {@code "id"} is a string or an integer and
 * whose {@code "x"} is a number or nested lists of numbers, rectangular, finite as float32, of the
 * shape the model takes (or, when that is not given, of the first good event's shape). Other
 * fields are skipped; a field given twice counts as its last value. Stateless.
 */
public final class JsonEvents extends AbstractStreamOperator<byte[]> implements OneInputStreamOperator<String[], byte[]> {

    private static final long serialVersionUID = 1L;
    private static final int MAX_RANK = 32;
    private static final JsonFactory JSON = new JsonFactory();
    private final int[] shape;
    private transient float[] values;
    private transient int valueCount;
    private transient int[] dims;
    private transient int rank;

    /** @param shape the features' shape the model takes, or {@code null}: the first good event's. */
    public JsonEvents(int[] shape) {
        this.shape = shape == null ? null : shape.clone();
    }

    /** A bad event as it is written out: its index in the chunk, its reason and its text in UTF-8. */
    private static final class Bad {
        final int index;
        final byte[] reason;
        final byte[] text;

        Bad(int index, String reason, String text) {
            this.index = index;
            this.reason = reason.getBytes(StandardCharsets.UTF_8);
            this.text = text.getBytes(StandardCharsets.UTF_8);
        }
    }

    private static final class Reject extends Exception {
        private static final long serialVersionUID = 1L;

        Reject(String reason) {
            super(reason, null, false, false);
        }
    }

    @Override
    public void processElement(StreamRecord<String[]> element) {
        String[] chunk = element.getValue();
        long before = Long.parseLong(chunk[1]);
        int events = chunk.length - 2;
        if (values == null) {
            values = new float[1024];
            dims = new int[MAX_RANK];
        }
        valueCount = 0;
        int[] want = shape;
        List<byte[]> keys = new ArrayList<>(events);
        List<Bad> bad = new ArrayList<>();
        int keyBytes = 0;
        for (int i = 0; i < events; i++) {
            String text = chunk[i + 2];
            int start = valueCount;
            try {
                String key = parse(text);
                int[] got = Arrays.copyOf(dims, rank);
                if (want == null) {
                    want = got;
                } else if (!Arrays.equals(got, want)) {
                    throw new Reject("ValueError: features of shape " + tuple(got) + ", the model takes " + tuple(want));
                }
                byte[] encoded = key.getBytes(StandardCharsets.UTF_8);
                keys.add(encoded);
                keyBytes += encoded.length;
            } catch (Reject err) {
                valueCount = start;
                bad.add(new Bad(i, err.getMessage(), text == null ? "" : text));
            }
        }
        int[] dimsOut = want == null ? new int[0] : want;
        int size = 8 + 4 + 4 + 4 + 4 * dimsOut.length + 4 * keys.size() + keyBytes + 4 * valueCount;
        for (Bad b : bad) {
            size += 4 + 4 + b.reason.length + 4 + b.text.length;
        }
        ByteBuffer out = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
        out.putLong(before).putInt(keys.size()).putInt(bad.size()).putInt(dimsOut.length);
        for (int d : dimsOut) {
            out.putInt(d);
        }
        for (byte[] key : keys) {
            out.putInt(key.length);
        }
        for (byte[] key : keys) {
            out.put(key);
        }
        out.asFloatBuffer().put(values, 0, valueCount);
        out.position(out.position() + 4 * valueCount);
        for (Bad b : bad) {
            out.putInt(b.index).putInt(b.reason.length).put(b.reason).putInt(b.text.length).put(b.text);
        }
        output.collect(element.hasTimestamp() ? new StreamRecord<>(out.array(), element.getTimestamp())
                : new StreamRecord<>(out.array()));
    }

    /** The event's key; its features appended to {@code values}, their shape in {@code dims[:rank]}. */
    private String parse(String text) throws Reject {
        if (text == null) {
            throw new Reject("ValueError: an empty event");
        }
        try (JsonParser p = JSON.createParser(text)) {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                throw new Reject("ValueError: an event is a JSON object with 'id' and 'x'");
            }
            String key = null;
            boolean hasX = false;
            int start = valueCount;
            for (JsonToken t = p.nextToken(); t != JsonToken.END_OBJECT; t = p.nextToken()) {
                String name = p.currentName();
                t = p.nextToken();
                if ("id".equals(name)) {
                    if (t == JsonToken.VALUE_STRING) {
                        key = p.getText();
                    } else if (t == JsonToken.VALUE_NUMBER_INT) {
                        key = p.getBigIntegerValue().toString();
                    } else {
                        throw new Reject("ValueError: an event's 'id' is a string or an integer");
                    }
                } else if ("x".equals(name)) {
                    valueCount = start;  // a second "x" replaces the first, as in Python's json
                    Arrays.fill(dims, -1);
                    rank = -1;
                    features(p, t, 0);
                    if (rank < 0) {
                        rank = 0;
                    }
                    hasX = true;
                } else {
                    p.skipChildren();
                }
            }
            if (p.nextToken() != null) {
                throw new Reject("ValueError: more after the event's JSON object");
            }
            if (key == null || !hasX) {
                throw new Reject("KeyError: an event needs both 'id' and 'x'");
            }
            return key;
        } catch (IOException err) {
            String message = String.valueOf(err.getMessage());
            int line = message.indexOf('\n');
            throw new Reject("ValueError: not JSON: " + (line < 0 ? message : message.substring(0, line)));
        }
    }

    private void features(JsonParser p, JsonToken t, int depth) throws IOException, Reject {
        if (t == JsonToken.START_ARRAY) {
            if (depth >= MAX_RANK) {
                throw new Reject("ValueError: features nested deeper than " + MAX_RANK);
            }
            int count = 0;
            for (JsonToken item = p.nextToken(); item != JsonToken.END_ARRAY; item = p.nextToken()) {
                features(p, item, depth + 1);
                count++;
            }
            if (count == 0) {
                leaf(depth + 1);
            }
            if (dims[depth] < 0) {
                dims[depth] = count;
            } else if (dims[depth] != count) {
                throw new Reject("ValueError: features that are not a rectangular array");
            }
        } else if (t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT) {
            leaf(depth);
            float value = (float) p.getDoubleValue();
            if (!Float.isFinite(value)) {
                throw new Reject("ValueError: features that are not finite");
            }
            if (valueCount == values.length) {
                values = Arrays.copyOf(values, 2 * values.length);
            }
            values[valueCount++] = value;
        } else {
            throw new Reject("ValueError: features are numbers or nested lists of numbers");
        }
    }

    private void leaf(int depth) throws Reject {
        if (rank < 0) {
            rank = depth;
        } else if (rank != depth) {
            throw new Reject("ValueError: features that are not a rectangular array");
        }
    }

    /** {@code shape} as Python writes a tuple: {@code ()}, {@code (20,)}, {@code (8, 8)}. */
    static String tuple(int[] shape) {
        StringBuilder out = new StringBuilder("(");
        for (int i = 0; i < shape.length; i++) {
            out.append(i > 0 ? ", " : "").append(shape[i]);
        }
        return out.append(shape.length == 1 ? ",)" : ")").toString();
    }
}
