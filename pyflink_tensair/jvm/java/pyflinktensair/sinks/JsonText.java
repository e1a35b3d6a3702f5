package pyflinktensair.sinks;

import java.util.Collection;

import org.apache.flink.types.Row;

/**
 * JSON text of the values a job's rows hold: null, strings, numbers, booleans, lists and arrays
 * (bytes excepted: a string), maps (objects), and nested rows (arrays: a nested row carries no field
 * names). Anything else is written as its {@code toString()} in a string.
 */
public final class JsonText {

    private JsonText() {
    }

    public static void row(Row row, String[] fields, StringBuilder out) {
        out.append('{');
        for (int i = 0; i < fields.length; i++) {
            if (i > 0) {
                out.append(',');
            }
            string(fields[i], out);
            out.append(':');
            value(row.getField(i), out);
        }
        out.append('}');
    }

    public static void value(Object value, StringBuilder out) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof String) {
            string((String) value, out);
        } else if (value instanceof Double || value instanceof Float) {
            double d = ((Number) value).doubleValue();
            out.append(Double.isFinite(d) ? Double.toString(d) : "null");
        } else if (value instanceof Number || value instanceof Boolean) {
            out.append(value);
        } else if (value instanceof Collection) {
            out.append('[');
            boolean first = true;
            for (Object item : (Collection<?>) value) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                value(item, out);
            }
            out.append(']');
        } else if (value instanceof java.util.Map) {
            out.append('{');
            boolean first = true;
            for (java.util.Map.Entry<?, ?> entry : ((java.util.Map<?, ?>) value).entrySet()) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                string(String.valueOf(entry.getKey()), out);
                out.append(':');
                value(entry.getValue(), out);
            }
            out.append('}');
        } else if (value.getClass().isArray() && !(value instanceof byte[])) {
            int length = java.lang.reflect.Array.getLength(value);
            out.append('[');
            for (int i = 0; i < length; i++) {
                if (i > 0) {
                    out.append(',');
                }
                value(java.lang.reflect.Array.get(value, i), out);
            }
            out.append(']');
        } else if (value instanceof Row) {
            Row row = (Row) value;
            out.append('[');
            for (int i = 0; i < row.getArity(); i++) {
                if (i > 0) {
                    out.append(',');
                }
                value(row.getField(i), out);
            }
            out.append(']');
        } else {
            string(value.toString(), out);
        }
    }

    public static void string(String text, StringBuilder out) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }
}
