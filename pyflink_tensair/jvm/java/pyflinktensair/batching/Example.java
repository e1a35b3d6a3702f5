package pyflinktensair.batching;

import java.io.IOException;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.List;

import org.apache.flink.api.java.tuple.Tuple;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonToken;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.json.JsonReadFeature;
import org.apache.flink.types.Row;

import pyflinktensair.json.FlatNumbers;

/**
 * One training example read on the JVM: its features (as doubles, row-major, with their shape)
 * and its label, from the record kinds {@code to_batches} takes without Python:
 * <ul>
 *   <li>JSON text {@code {"x": <number or nested lists of numbers>, "y": <number or null>}}, what
 *       {@code pyflink_tensair.kafka.source.json_example} reads (other fields are skipped; a field
 *       given twice counts as its last value; {@code NaN} and {@code Infinity} are read as Python's
 *       json reads them, and then refused as not finite);</li>
 *   <li>a {@link Row} or a {@link Tuple} of arity 1 or 2, {@code (features[, label])}: features a
 *       number, a primitive array, an array or a list (nested for more dimensions).</li>
 * </ul>
 * A record that is not an example throws {@link Reject} with the reason and the words
 * {@code pyflink_tensair.core.guards.check_record} gives (the shape, labelled and class checks
 * against the stream are {@link Columns}'). Features that are strings are refused (NumPy would
 * read numeric strings). Not thread-safe; one per operator.
 */
final class Example {

    static final int MAX_RANK = 32;
    private static final JsonFactory JSON = JsonFactory.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS).build();

    double[] values = new double[64];
    int valueCount;
    final int[] dims = new int[MAX_RANK];
    int rank;
    boolean labelled;
    boolean labelIsInt;
    long intLabel;
    double label;

    /** A record that is not an example: {@code reason} one of the dead-letter reasons. */
    static final class Reject extends Exception {
        private static final long serialVersionUID = 1L;
        final String reason;

        Reject(String reason, String detail) {
            super(detail, null, false, false);
            this.reason = reason;
        }
    }

    /** Reads {@code record} (a String, Row or Tuple) into this example's fields. */
    void read(Object record) throws Reject {
        reset();
        if (record instanceof String) {
            readJson((String) record);
        } else if (record instanceof Row) {
            Row row = (Row) record;
            readFields(row.getArity(), i -> row.getField(i));
        } else if (record instanceof Tuple) {
            Tuple tuple = (Tuple) record;
            readFields(tuple.getArity(), tuple::getField);
        } else {
            throw new Reject("missing_field", "a record is (features, label) or (features,); received a "
                    + (record == null ? "NoneType" : record.getClass().getSimpleName()));
        }
    }

    /** No features, no shape, no label: before a record is read. */
    private void reset() {
        valueCount = 0;
        rank = -1;
        Arrays.fill(dims, -1);
        labelled = false;
    }

    private interface Field {
        Object get(int i);
    }

    private void readFields(int arity, Field field) throws Reject {
        if (arity != 1 && arity != 2) {
            throw new Reject("missing_field", "a record is (features, label) or (features,); received " + arity + " fields");
        }
        object(field.get(0), 0);
        if (rank < 0) {
            rank = 0;
        }
        if (arity == 2) {
            Object value = field.get(1);
            if (value == null) {
                throw new Reject("missing_field", "the label is None");
            }
            if (value instanceof Boolean || !(value instanceof Number)) {
                throw new Reject("wrong_dtype", "a label is a number; received a " + value.getClass().getSimpleName());
            }
            Number number = (Number) value;
            boolean integral = value instanceof Integer || value instanceof Long || value instanceof Short
                    || value instanceof Byte || value instanceof BigInteger;
            setLabel(integral, integral ? number.longValue() : 0, number.doubleValue());
        }
        finiteFeatures();
    }

    private void setLabel(boolean integral, long asLong, double asDouble) throws Reject {
        labelled = true;
        labelIsInt = integral;
        intLabel = asLong;
        label = integral ? (double) asLong : asDouble;
        if (!Double.isFinite(label)) {
            throw new Reject("non_finite", "the label is " + python(label));
        }
    }

    private void finiteFeatures() throws Reject {
        for (int i = 0; i < valueCount; i++) {
            if (!Double.isFinite(values[i])) {
                throw new Reject("non_finite", "features hold NaN or infinite values");
            }
        }
    }

    private void object(Object value, int depth) throws Reject {
        if (value == null || value instanceof Number || value instanceof Boolean) {
            leaf(depth);  // None reads as NaN, as NumPy reads it
            append(value == null ? Double.NaN
                    : value instanceof Boolean ? (((Boolean) value) ? 1.0 : 0.0) : ((Number) value).doubleValue());
            return;
        }
        if (depth >= MAX_RANK) {
            throw new Reject("wrong_shape", "features nested deeper than " + MAX_RANK);
        }
        int count;
        if (value instanceof double[]) {
            double[] a = (double[]) value;
            count = a.length;
            for (double v : a) {
                append(v);
            }
            leaf(depth + 1);
        } else if (value instanceof float[]) {
            float[] a = (float[]) value;
            count = a.length;
            for (float v : a) {
                append(v);
            }
            leaf(depth + 1);
        } else if (value instanceof long[]) {
            long[] a = (long[]) value;
            count = a.length;
            for (long v : a) {
                append(v);
            }
            leaf(depth + 1);
        } else if (value instanceof int[]) {
            int[] a = (int[]) value;
            count = a.length;
            for (int v : a) {
                append(v);
            }
            leaf(depth + 1);
        } else if (value instanceof short[]) {
            short[] a = (short[]) value;
            count = a.length;
            for (short v : a) {
                append(v);
            }
            leaf(depth + 1);
        } else if (value instanceof Object[] || value instanceof List) {
            List<?> items = value instanceof List ? (List<?>) value : Arrays.asList((Object[]) value);
            count = items.size();
            for (Object item : items) {
                object(item, depth + 1);
            }
            if (count == 0) {
                leaf(depth + 1);
            }
        } else {
            throw new Reject("wrong_dtype", "features are not an array of numbers (a " + value.getClass().getSimpleName() + ")");
        }
        dim(depth, count);
    }

    private void dim(int depth, int count) throws Reject {
        if (dims[depth] < 0) {
            dims[depth] = count;
        } else if (dims[depth] != count) {
            throw new Reject("wrong_shape", "features are a ragged list of lists");
        }
    }

    private void leaf(int depth) throws Reject {
        if (rank < 0) {
            rank = depth;
        } else if (rank != depth) {
            throw new Reject("wrong_shape", "features are a ragged list of lists");
        }
    }

    private void append(double value) {
        if (valueCount == values.length) {
            values = Arrays.copyOf(values, 2 * values.length);
        }
        values[valueCount++] = value;
    }

    // --- JSON text ------------------------------------------------------------------------------

    private void readJson(String text) throws Reject {
        if (!readByHand(text)) {
            reset();
            readWithJackson(text);
        }
        finiteFeatures();
    }

    private void readWithJackson(String text) throws Reject {
        try (JsonParser p = JSON.createParser(text)) {
            JsonToken first = p.nextToken();
            if (first != JsonToken.START_OBJECT) {
                throw new Reject("not_a_record", "ValueError: a record is a JSON object with 'x' (and 'y'), not a JSON "
                        + jsonKind(first));
            }
            boolean hasX = false;
            for (JsonToken t = p.nextToken(); t != JsonToken.END_OBJECT; t = p.nextToken()) {
                String name = p.currentName();
                t = p.nextToken();
                if ("x".equals(name)) {
                    valueCount = 0;  // a second "x" replaces the first, as in Python's json
                    rank = -1;
                    Arrays.fill(dims, -1);
                    jsonFeatures(p, t, 0);
                    if (rank < 0) {
                        rank = 0;
                    }
                    hasX = true;
                } else if ("y".equals(name)) {
                    labelled = false;
                    if (t == JsonToken.VALUE_NUMBER_INT) {
                        if (p.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
                            setLabel(false, 0, p.getDoubleValue());
                        } else {
                            setLabelUnchecked(true, p.getLongValue(), 0);
                        }
                    } else if (t == JsonToken.VALUE_NUMBER_FLOAT) {
                        setLabelUnchecked(false, 0, p.getDoubleValue());
                    } else if (t == JsonToken.VALUE_TRUE || t == JsonToken.VALUE_FALSE) {
                        throw new Reject("wrong_dtype", "a label is a number; received a bool");
                    } else if (t != JsonToken.VALUE_NULL) {
                        throw new Reject("wrong_dtype", "a label is a number; received a " + jsonKind(t));
                    }
                    p.skipChildren();
                } else {
                    p.skipChildren();
                }
            }
            if (p.nextToken() != null) {
                throw new Reject("not_a_record", "JSONDecodeError: extra data after the record's JSON object");
            }
            if (!hasX) {
                throw new Reject("not_a_record", "KeyError: 'x'");
            }
            if (labelled && !Double.isFinite(label)) {
                throw new Reject("non_finite", "the label is " + python(label));
            }
        } catch (IOException err) {
            String message = String.valueOf(err.getMessage());
            int line = message.indexOf('\n');
            throw new Reject("not_a_record", "JSONDecodeError: " + (line < 0 ? message : message.substring(0, line)));
        }
    }

    private void setLabelUnchecked(boolean integral, long asLong, double asDouble) {
        labelled = true;
        labelIsInt = integral;
        intLabel = asLong;
        label = integral ? (double) asLong : asDouble;
    }

    private static String jsonKind(JsonToken t) {
        if (t == null) {
            return "nothing";
        }
        switch (t) {
            case START_ARRAY: return "list";
            case VALUE_STRING: return "str";
            case VALUE_NUMBER_INT: return "int";
            case VALUE_NUMBER_FLOAT: return "float";
            case VALUE_TRUE: case VALUE_FALSE: return "bool";
            case VALUE_NULL: return "NoneType";
            case START_OBJECT: return "dict";
            default: return t.toString();
        }
    }

    private void jsonFeatures(JsonParser p, JsonToken t, int depth) throws IOException, Reject {
        if (t == JsonToken.START_ARRAY) {
            if (depth >= MAX_RANK) {
                throw new Reject("wrong_shape", "features nested deeper than " + MAX_RANK);
            }
            int count = 0;
            for (JsonToken item = p.nextToken(); item != JsonToken.END_ARRAY; item = p.nextToken()) {
                jsonFeatures(p, item, depth + 1);
                count++;
            }
            if (count == 0) {
                leaf(depth + 1);
            }
            dim(depth, count);
        } else if (t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT) {
            leaf(depth);
            append(p.getDoubleValue());
        } else if (t == JsonToken.VALUE_TRUE || t == JsonToken.VALUE_FALSE || t == JsonToken.VALUE_NULL) {
            leaf(depth);  // null reads as NaN, as NumPy reads None
            append(t == JsonToken.VALUE_NULL ? Double.NaN : t == JsonToken.VALUE_TRUE ? 1.0 : 0.0);
        } else {
            if (t == JsonToken.START_OBJECT) {
                p.skipChildren();
            }
            throw new Reject("wrong_dtype", "features are not an array of numbers (a " + jsonKind(t) + ")");
        }
    }

    /**
     * The common record, {@code {"x": [<numbers>], "y": <integer>}} (either order, {@code "y"}
     * optional), read by hand: {@code false} when the text holds anything else (nesting, other or
     * repeated names, numbers {@link FlatNumbers} leaves to Jackson, a label that is not a small
     * integer, anything that is not JSON), which Jackson then reads, errors and all.
     */
    private boolean readByHand(String text) {
        int n = text.length();
        int i = space(text, 0);
        if (i >= n || text.charAt(i) != '{') {
            return false;
        }
        boolean hasX = false;
        i = space(text, i + 1);
        while (true) {
            boolean isY = text.startsWith("\"y\"", i);
            if (isY ? labelled : hasX || !text.startsWith("\"x\"", i)) {
                return false;
            }
            i = space(text, i + 3);
            if (i >= n || text.charAt(i) != ':') {
                return false;
            }
            i = space(text, i + 1);
            if (isY) {
                int start = i;
                boolean negative = i < n && text.charAt(i) == '-';
                if (negative) {
                    i++;
                }
                long value = 0;
                int digits = 0;
                for (char c; i < n && (c = text.charAt(i)) >= '0' && c <= '9'; i++) {
                    value = 10 * value + (c - '0');
                    if (++digits > 15 || (digits > 1 && text.charAt(i - digits + 1) == '0')) {
                        return false;  // long, or a leading zero (not JSON: Jackson's to refuse)
                    }
                }
                if (digits == 0 || i == start) {
                    return false;
                }
                setLabelUnchecked(true, negative ? -value : value, 0);
            } else {
                i = numbers(text, i);
                if (i < 0) {
                    return false;
                }
                hasX = true;
            }
            i = space(text, i);
            if (i < n && text.charAt(i) == ',') {
                i = space(text, i + 1);
            } else if (i < n && text.charAt(i) == '}') {
                break;
            } else {
                return false;
            }
        }
        return space(text, i + 1) == n && hasX;
    }

    /** A flat, non-empty array of numbers at {@code i}: the index after it, or -1. */
    private int numbers(String text, int i) {
        int start = valueCount;
        int end = FlatNumbers.read(text, i, this::append);
        if (end < 0) {
            return -1;
        }
        rank = 1;
        dims[0] = valueCount - start;
        return end;
    }

    private static int space(String text, int i) {
        return FlatNumbers.space(text, i);
    }

    /** {@code value} as Python prints a float: {@code nan}, {@code inf}, {@code -inf}, {@code 1.5}. */
    static String python(double value) {
        if (Double.isNaN(value)) {
            return "nan";
        }
        if (Double.isInfinite(value)) {
            return value > 0 ? "inf" : "-inf";
        }
        return Double.toString(value);
    }

    /** {@code shape} as Python writes a tuple: {@code ()}, {@code (20,)}, {@code (8, 8)}. */
    static String tuple(int[] shape) {
        StringBuilder out = new StringBuilder("(");
        for (int i = 0; i < shape.length; i++) {
            out.append(i > 0 ? ", " : "").append(shape[i]);
        }
        return out.append(shape.length == 1 ? ",)" : ")").toString();
    }

    /**
     * For tests: what this reader makes of one record, {@code {shape, features, label or null,
     * label is an int}}, or {@code {reason, detail}} for one it refuses; {@code byHand=false}:
     * JSON read by Jackson alone (the two must agree on every text).
     */
    public static Object[] readForTests(Object record, boolean byHand) {
        Example example = new Example();
        try {
            if (record instanceof String && !byHand) {
                example.reset();
                example.readWithJackson((String) record);
                example.finiteFeatures();
            } else {
                example.read(record);
            }
        } catch (Reject err) {
            return new Object[] {err.reason, err.getMessage()};
        }
        return new Object[] {Arrays.copyOf(example.dims, example.rank), Arrays.copyOf(example.values, example.valueCount),
            example.labelled ? (example.labelIsInt ? (Object) example.intLabel : (Object) example.label) : null};
    }

    /** For tests: whether the hand reader reads {@code text} itself (else it leaves it to Jackson). */
    public static boolean readsByHand(String text) {
        Example example = new Example();
        example.reset();
        return example.readByHand(text);
    }
}
