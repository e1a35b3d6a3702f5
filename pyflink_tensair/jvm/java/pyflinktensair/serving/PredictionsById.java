package pyflinktensair.serving;

import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

import pyflinktensair.sinks.JsonText;

/**
 * A row whose first field is its id, e.g. a prediction {@code (key, prediction, model_version,
 * model_age_ms, served_at_ms)}, as {@code Row(id, JSON object of the other fields, named as given)}:
 * the shape PyFlink's keyed Python functions take (the key
 * in field 0, the value in field 1), made on the JVM so that scoring the predictions does not
 * cross into Python once more per event just to key them.
 */
public final class PredictionsById extends AbstractStreamOperator<Row> implements OneInputStreamOperator<Row, Row> {

    private static final long serialVersionUID = 1L;
    private final String[] fields;

    /** {@code fields}: the names of the row's fields after the first. */
    public PredictionsById(String[] fields) {
        this.fields = fields.clone();
    }

    @Override
    public void processElement(StreamRecord<Row> element) {
        Row prediction = element.getValue();
        if (prediction.getArity() != fields.length + 1) {
            throw new IllegalArgumentException("a row of " + prediction.getArity() + " fields, not an id and "
                    + String.join(", ", fields));
        }
        StringBuilder text = new StringBuilder(64);
        text.append('{');
        for (int i = 0; i < fields.length; i++) {
            if (i > 0) {
                text.append(',');
            }
            JsonText.string(fields[i], text);
            text.append(':');
            JsonText.value(prediction.getField(i + 1), text);
        }
        text.append('}');
        output.collect(element.replace(Row.of(prediction.getField(0), text.toString())));
    }
}
