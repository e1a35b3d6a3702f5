package pyflinktensair.serving;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.types.Row;

/**
 * {@code Row(0, record)}: a stream keyed as one, so that an operator that sees all of it (a score's
 * window) keeps its counts in keyed Flink state, without a Python crossing to make the key.
 */
public final class OneKey implements MapFunction<Object, Row> {

    private static final long serialVersionUID = 1L;

    @Override
    public Row map(Object record) {
        return Row.of(0, record);
    }
}
