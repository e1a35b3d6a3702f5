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

import pyflinktensair.json.FlatNumbers;

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
    /** {@code TENSAIR_EVENTS_BY_HAND=0} in the TaskManager's environment: Jackson reads every event (before/after measurements). */
    private static final boolean BY_HAND = !"0".equals(System.getenv("TENSAIR_EVENTS_BY_HAND"));
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
        int before = valueCount;
        String common = BY_HAND ? common(text) : null;
        if (common != null) {
            return common;
        }
        valueCount = before;
        return jackson(text);
    }

    private String jackson(String text) throws Reject {
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

    /**
     * The common event, {@code {"id": "<text>", "x": [<numbers>]}} in either order, read by hand:
     * its key, or {@code null} when the text holds anything else (an id with escapes or that is a
     * number, other or repeated names, nested or empty features, a number with an exponent or
     * beyond the exact range below, anything that is not JSON), which {@link #parse} then reads with
     * Jackson, errors and all. Jackson's reading of numbers cost three quarters of this operator's
     * time (a profile of a server, docs/measurements.md, 2026-12-06). Each number is the one
     * Jackson gives: an integer of at most 2^53 and a power of ten of at most 22 are exact doubles,
     * so their quotient is the correctly rounded double of the decimal, as
     * {@link Double#parseDouble} returns it (Clinger's fast path), then rounded to a float the same way.
     */
    private String common(String text) {
        int n = text.length();
        int i = space(text, 0);
        if (i >= n || text.charAt(i) != '{') {
            return null;
        }
        String key = null;
        boolean hasX = false;
        i = space(text, i + 1);
        while (true) {
            boolean isId = text.startsWith("\"id\"", i);
            if (isId ? key != null : hasX || !text.startsWith("\"x\"", i)) {
                return null;
            }
            i = space(text, i + (isId ? 4 : 3));
            if (i >= n || text.charAt(i) != ':') {
                return null;
            }
            i = space(text, i + 1);
            if (isId) {
                if (i >= n || text.charAt(i) != '"') {
                    return null;
                }
                int end = i + 1;
                for (char c; end < n && (c = text.charAt(end)) != '"'; end++) {
                    if (c == '\\' || c < 0x20) {
                        return null;
                    }
                }
                if (end >= n || end - i - 1 > LONGEST_ID) {
                    return null;
                }
                key = text.substring(i + 1, end);
                i = end + 1;
            } else {
                i = numbers(text, i);
                if (i < 0) {
                    return null;
                }
                hasX = true;
            }
            i = space(text, i);
            if (i < n && text.charAt(i) == ',') {
                i = space(text, i + 1);
            } else if (i < n && text.charAt(i) == '}') {
                break;
            } else {
                return null;
            }
        }
        if (space(text, i + 1) != n || key == null || !hasX) {
            return null;
        }
        return key;
    }

    /** Longer ids go to Jackson, whose limits (20 M characters by default) then hold for them too. */
    private static final int LONGEST_ID = 1 << 16;

    /**
     * A flat, non-empty array of numbers at {@code i} appended to {@code values}: the index after it,
     * or -1 (also for a number beyond float32's range: Jackson's reading refuses it, with its reason).
     */
    private int numbers(String text, int i) {
        int start = valueCount;
        int end = FlatNumbers.read(text, i, this::appendFloat);
        if (end < 0) {
            return -1;
        }
        for (int v = start; v < valueCount; v++) {
            if (!Float.isFinite(values[v])) {
                return -1;
            }
        }
        rank = 1;
        dims[0] = valueCount - start;
        return end;
    }

    private void appendFloat(double value) {
        if (valueCount == values.length) {
            values = Arrays.copyOf(values, 2 * values.length);
        }
        values[valueCount++] = (float) value;
    }

    private static int space(String text, int i) {
        return FlatNumbers.space(text, i);
    }

    /**
     * For tests: what this operator makes of one event text, {@code {key, shape, features}}, or
     * {@code null} for a text it sets aside; {@code byHand}: as {@link #parse} reads it (by hand
     * where it can, else Jackson), else with Jackson alone. The two must agree on every text.
     */
    public static Object[] read(String text, boolean byHand) {
        JsonEvents reader = unopened();
        try {
            String key = byHand ? reader.parse(text) : reader.jackson(text);
            return new Object[] {key, Arrays.copyOf(reader.dims, reader.rank),
                Arrays.copyOf(reader.values, reader.valueCount)};
        } catch (Reject err) {
            return null;
        }
    }

    /** For tests: whether {@link #common} reads {@code text} itself (else it leaves it to Jackson). */
    public static boolean readsByHand(String text) {
        return unopened().common(text) != null;
    }

    /** A reader of any shape with its buffers, outside a job. */
    private static JsonEvents unopened() {
        JsonEvents reader = new JsonEvents(null);
        reader.values = new float[16];
        reader.dims = new int[MAX_RANK];
        return reader;
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
