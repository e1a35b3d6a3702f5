package pyflinktensair.json;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.io.NumberInput;

/**
 * A flat JSON array of plain numbers read by hand, for the common record whose features are one:
 * Jackson's reading of numbers was three quarters of the servers' parse (docs/measurements.md,
 * 2026-12-06). {@link #read} gives up (-1) on anything else (an integer of more digits than a
 * double holds exactly, nesting, an empty array, anything that is not JSON), which the caller then
 * leaves to Jackson, errors and all. Each number is the one Jackson gives: an integer of at most
 * 2^53 over a power of ten of at most 22 is the correctly rounded double of the decimal (Clinger's
 * fast path), what {@link Double#parseDouble} returns; a number with a fraction or an exponent
 * beyond that (a float64 as Python writes it has 17 digits) is the correctly rounded double too,
 * from Jackson's fast parser (FastDoubleParser: 5x {@link Double#parseDouble}'s big-integer path
 * on such numbers, and the same bits).
 */
public final class FlatNumbers {

    /** Takes each number read, in order. */
    public interface Sink {
        void accept(double value);
    }

    private static final double[] POWERS_OF_TEN = {
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    private static final long EXACT = 1L << 53;

    private FlatNumbers() {}

    /**
     * Reads the non-empty array of numbers at {@code i} of {@code text} into {@code sink}: the index
     * after its {@code ']'}, or -1 (the sink may then have taken some of its numbers).
     */
    public static int read(String text, int i, Sink sink) {
        int n = text.length();
        if (i >= n || text.charAt(i) != '[') {
            return -1;
        }
        i = space(text, i + 1);
        while (true) {
            int start = i;
            boolean negative = i < n && text.charAt(i) == '-';
            if (negative) {
                i++;
            }
            if (i >= n) {
                return -1;
            }
            char c = text.charAt(i);
            long mantissa = 0;
            boolean inexact = false;  // more digits than the fast path takes: Double.parseDouble's
            if (c == '0') {
                i++;
            } else if (c >= '1' && c <= '9') {
                for (; i < n && (c = text.charAt(i)) >= '0' && c <= '9'; i++) {
                    if (!inexact && (mantissa = 10 * mantissa + (c - '0')) >= EXACT) {
                        inexact = true;
                    }
                }
            } else {
                return -1;
            }
            int scale = 0;
            boolean fraction = i < n && text.charAt(i) == '.';
            if (fraction) {
                int first = ++i;
                for (; i < n && (c = text.charAt(i)) >= '0' && c <= '9'; i++) {
                    if (!inexact && ((mantissa = 10 * mantissa + (c - '0')) >= EXACT || ++scale >= POWERS_OF_TEN.length)) {
                        inexact = true;
                    }
                }
                if (i == first) {
                    return -1;
                }
            }
            boolean exponent = i < n && (text.charAt(i) == 'e' || text.charAt(i) == 'E');
            if (exponent) {
                i++;
                if (i < n && (text.charAt(i) == '+' || text.charAt(i) == '-')) {
                    i++;
                }
                int first = i;
                while (i < n && (c = text.charAt(i)) >= '0' && c <= '9') {
                    i++;
                }
                if (i == first) {
                    return -1;
                }
            }
            if (inexact || exponent) {
                if (!fraction && !exponent) {
                    return -1;  // an integer beyond 2^53: Jackson's (a long or a big integer)
                }
                sink.accept(NumberInput.parseDouble(text.substring(start, i), true));
            } else {
                double value = mantissa / POWERS_OF_TEN[scale];
                // "-0" is Jackson's integer 0, and +0.0 as a double; "-0.0" is -0.0
                sink.accept(negative && (fraction || mantissa != 0) ? -value : value);
            }
            i = space(text, i);
            if (i < n && text.charAt(i) == ',') {
                i = space(text, i + 1);
            } else if (i < n && text.charAt(i) == ']') {
                return i + 1;
            } else {
                return -1;  // a second '.', a letter, a missing comma: Jackson's to read or refuse
            }
        }
    }

    /** The index of the first character at or after {@code i} that is not JSON white space. */
    public static int space(String text, int i) {
        int n = text.length();
        while (i < n) {
            char c = text.charAt(i);
            if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
                break;
            }
            i++;
        }
        return i;
    }
}
