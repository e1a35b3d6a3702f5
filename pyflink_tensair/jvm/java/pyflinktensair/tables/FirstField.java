package pyflinktensair.tables;

import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * The first field of each row, as a string, with the row's timestamp: a table's records made into
 * the texts the project's operators read, on the JVM. The table keeps its time column beside the
 * text so that its rowtime becomes the records' timestamps (and its watermarks pass on); only the
 * text goes on.
 */
public final class FirstField extends AbstractStreamOperator<String> implements OneInputStreamOperator<Row, String> {

    private static final long serialVersionUID = 1L;

    @Override
    public void processElement(StreamRecord<Row> element) {
        Object first = element.getValue().getField(0);
        output.collect(element.replace(first == null ? null : first.toString()));
    }
}
