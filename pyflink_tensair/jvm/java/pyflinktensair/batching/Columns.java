package pyflinktensair.batching;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * A partial mini-batch as columns: the features of its examples as float32, row-major, and their
 * labels, with what the stream has settled (the features' shape and whether examples carry labels,
 * from the first good one unless given). {@link #add} checks an {@link Example} against them as
 * {@code pyflink_tensair.core.guards.check_record} does; {@link #batch} encodes the batch as
 * {@code pyflink_tensair.core.wire.encode_batch} would ({@code x} float32, {@code y} int64 when
 * every label is an integer, else float64: NumPy's reading of the label list).
 */
final class Columns {

    int[] shape;       // per example; null until the first good one
    int labelled = -1; // -1 not yet known, 0 no labels, 1 labels
    private final int classes;  // 0: any label
    private int perExample = -1;
    private float[] values = new float[1024];
    private long[] intLabels = new long[64];
    private double[] labels = new double[64];
    private boolean allInt = true;
    int size;

    Columns(int[] shape, int classes) {
        this.shape = shape == null ? null : shape.clone();
        this.classes = classes;
    }

    /** Adds {@code example} or throws why it does not belong to this stream. */
    void add(Example example) throws Example.Reject {
        int[] dims = Arrays.copyOf(example.dims, example.rank);
        if (labelled >= 0 && (labelled == 1) != example.labelled) {
            throw new Example.Reject("missing_field", labelled == 1 ? "the stream's records carry labels; this one has none"
                    : "the stream's records carry no labels; this one has one");
        }
        if (shape != null && !Arrays.equals(dims, shape)) {
            throw new Example.Reject("wrong_shape", "features of shape " + Example.tuple(dims) + "; the stream's are "
                    + Example.tuple(shape));
        }
        if (example.labelled && classes > 0
                && !(example.label == Math.rint(example.label) && example.label >= 0 && example.label < classes)) {
            throw new Example.Reject("label_out_of_range", "labels must be classes 0 .. " + (classes - 1) + "; received "
                    + (example.labelIsInt ? Long.toString(example.intLabel) : Example.python(example.label)));
        }
        if (shape == null) {
            shape = dims;
        }
        if (labelled < 0) {
            labelled = example.labelled ? 1 : 0;
        }
        int width = width();
        ensure(size + 1);
        for (int i = 0; i < width; i++) {
            values[size * width + i] = (float) example.values[i];
        }
        if (example.labelled) {
            intLabels[size] = example.intLabel;
            labels[size] = example.label;
            allInt &= example.labelIsInt;
        }
        size++;
    }

    private int width() {
        if (perExample < 0) {
            int w = 1;
            for (int d : shape) {
                w *= d;
            }
            perExample = w;
        }
        return perExample;
    }

    private void ensure(int examples) {
        long need = (long) examples * width();
        if (need > values.length) {
            values = Arrays.copyOf(values, (int) Math.max(need, 2L * values.length));
        }
        if (examples > labels.length) {
            labels = Arrays.copyOf(labels, 2 * examples);
            intLabels = Arrays.copyOf(intLabels, 2 * examples);
        }
    }

    /** The pending examples as an encoded batch with {@code meta}; then empty. */
    byte[] batch(String meta) {
        int[] xShape = new int[shape.length + 1];
        xShape[0] = size;
        System.arraycopy(shape, 0, xShape, 1, shape.length);
        int xBytes = 4 * size * width();
        byte[] out;
        if (labelled == 1) {
            int yBytes = 8 * size;
            ByteBuffer body = WireRecords.body(xBytes, yBytes);
            body.asFloatBuffer().put(values, 0, size * width());
            body.position(WireRecords.padded(xBytes));
            if (allInt) {
                body.asLongBuffer().put(intLabels, 0, size);
            } else {
                body.asDoubleBuffer().put(labels, 0, size);
            }
            out = WireRecords.batch(meta, xShape, allInt ? "<i8" : "<f8", new int[] {size}, body.array(), xBytes, yBytes);
        } else {
            ByteBuffer body = WireRecords.body(xBytes);
            body.asFloatBuffer().put(values, 0, size * width());
            out = WireRecords.batch(meta, xShape, null, null, body.array(), xBytes, 0);
        }
        size = 0;
        allInt = true;
        return out;
    }

    /** What a checkpoint keeps: the settled shape and labels, and the pending examples. */
    byte[] snapshot() {
        int rank = shape == null ? -1 : shape.length;
        int width = shape == null ? 0 : width();
        ByteBuffer out = ByteBuffer.allocate(4 + 4 + 4 * Math.max(rank, 0) + 4 + 1 + 4 * size * width + 16 * size)
                .order(ByteOrder.LITTLE_ENDIAN);
        out.putInt(labelled).putInt(rank);
        for (int i = 0; i < rank; i++) {
            out.putInt(shape[i]);
        }
        out.putInt(size).put((byte) (allInt ? 1 : 0));
        for (int i = 0; i < size * width; i++) {
            out.putFloat(values[i]);
        }
        for (int i = 0; i < size; i++) {
            out.putLong(intLabels[i]).putDouble(labels[i]);
        }
        return out.array();
    }

    /** Adds what {@link #snapshot} kept; {@code false} (and nothing added) when its shape or labels differ. */
    boolean restore(byte[] snapshot) {
        ByteBuffer in = ByteBuffer.wrap(snapshot).order(ByteOrder.LITTLE_ENDIAN);
        int savedLabelled = in.getInt();
        int rank = in.getInt();
        int[] savedShape = rank < 0 ? null : new int[rank];
        for (int i = 0; i < rank; i++) {
            savedShape[i] = in.getInt();
        }
        int count = in.getInt();
        boolean savedAllInt = in.get() == 1;
        if (savedShape == null) {
            return count == 0;
        }
        if ((shape != null && !Arrays.equals(shape, savedShape)) || (labelled >= 0 && savedLabelled >= 0
                && labelled != savedLabelled && count > 0 && size > 0)) {
            return false;
        }
        shape = savedShape;
        perExample = -1;
        if (labelled < 0) {
            labelled = savedLabelled;
        }
        int width = width();
        ensure(size + count);
        for (int i = 0; i < count * width; i++) {
            values[size * width + i] = in.getFloat();
        }
        for (int i = 0; i < count; i++) {
            intLabels[size + i] = in.getLong();
            labels[size + i] = in.getDouble();
        }
        allInt &= savedAllInt;
        size += count;
        return true;
    }
}
