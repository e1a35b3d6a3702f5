package pyflinktensair.feedback;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;

/**
 * Backpressure from saturated replicas to the batch stream, wherever the replicas run.
 *
 * <p>A replica cannot stop reading batches (its task thread also reads its peers' gradients, and
 * Flink refuses input selection in jobs with checkpoints). So each replica reports on a side output
 * when it becomes, or stops being, saturated: {@code "<replica>:1"} or {@code "<replica>:0"}. Those
 * reports are broadcast through Flink's network to a {@link Receiver} subtask beside each {@link
 * Gate} subtask (one co-location group, so one JVM), and the gate, placed before the router that
 * deals batches, holds the batches while any replica is saturated. Held back there, Flink's own
 * backpressure carries on to the source.
 *
 * <p>A saturated replica repeats its report while it applies its peers' messages (at most every
 * 50 ms): it is catching up. The gate holds a batch while a replica is saturated and the last
 * report is at most {@code quietMs} old, and at most {@code maxWaitMs} per batch. A saturated
 * replica that applies nothing cannot be helped by holding, and must not be kept waiting: while
 * Flink aligns a checkpoint, its feedback input is blocked until the barrier arrives on its batch
 * input, and that barrier may queue behind batches the gate would hold one by one (the overload
 * benchmark stalled at 1 batch/s so); or it will never report again. Those batches train beyond the
 * bound, counted as before.
 */
public final class Credit {

    private static final ConcurrentHashMap<String, Saturation> LOOPS = new ConcurrentHashMap<>();

    private Credit() {}

    static Saturation of(String loopId) {
        return LOOPS.computeIfAbsent(loopId, k -> new Saturation());
    }

    /** The saturated replicas of one loop, as this JVM last heard. */
    static final class Saturation {
        private final Set<Integer> saturated = new HashSet<>(); // guarded by this
        // guarded by this: System.nanoTime() of each saturated replica's last report
        private final Map<Integer, Long> lastReport = new HashMap<>();
        private int attempt; // guarded by this

        /**
         * A receiver of task attempt {@code attempt} starts: reports of an earlier attempt are
         * void (the replicas start again unsaturated and report anew).
         */
        synchronized void start(int attempt) {
            if (attempt > this.attempt) {
                this.attempt = attempt;
                saturated.clear();
                lastReport.clear();
                notifyAll();
            }
        }

        synchronized void report(int replica, boolean isSaturated) {
            if (isSaturated) {
                lastReport.put(replica, System.nanoTime());
                saturated.add(replica);
            } else if (saturated.remove(replica)) {
                lastReport.remove(replica);
                notifyAll();
            }
        }

        /**
         * Waits while a replica is saturated and the newest report of a saturated replica is at
         * most {@code quietMs} old, at most {@code maxWaitMs}; returns the nanoseconds waited (0
         * when it did not wait).
         */
        synchronized long awaitUnsaturated(long maxWaitMs, long quietMs) throws InterruptedException {
            long began = System.nanoTime();
            long waitEnd = began + maxWaitMs * 1_000_000L;
            boolean waited = false;
            while (!saturated.isEmpty()) {
                long latest = Long.MIN_VALUE; // the saturated replica that reported last is still catching up
                for (long reported : lastReport.values()) {
                    latest = Math.max(latest, reported);
                }
                long left = Math.min(waitEnd, latest + quietMs * 1_000_000L) - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                wait(Math.max(1L, left / 1_000_000L));
                waited = true;
            }
            return waited ? System.nanoTime() - began : 0L;
        }
    }

    /** Parses a replica's report, {@code "<replica>:<0|1>"}. */
    static void apply(Saturation saturation, String report) {
        int colon = report.indexOf(':');
        if (colon <= 0 || colon != report.length() - 2) {
            throw new IllegalArgumentException("a credit report must read '<replica>:<0|1>', not '" + report + "'");
        }
        char state = report.charAt(colon + 1);
        if (state != '0' && state != '1') {
            throw new IllegalArgumentException("a credit report must read '<replica>:<0|1>', not '" + report + "'");
        }
        saturation.report(Integer.parseInt(report.substring(0, colon)), state == '1');
    }

    /**
     * Passes batches through, holding them while a replica of the loop is saturated. Metrics:
     * {@code credit_wait_ms} (time held in all) and {@code credit_holds} (batches held).
     */
    public static final class Gate extends RichMapFunction<byte[], byte[]> {
        private static final long serialVersionUID = 1L;
        private final String loopId;
        private final long maxWaitMs;
        private final long quietMs;
        private transient Saturation saturation;
        private transient volatile long waitedNanos;
        private transient volatile long holds;

        public Gate(String loopId, long maxWaitMs, long quietMs) {
            if (maxWaitMs < 1 || quietMs < 1) {
                throw new IllegalArgumentException("maxWaitMs and quietMs must be >= 1, not " + maxWaitMs + ", " + quietMs);
            }
            this.loopId = loopId;
            this.maxWaitMs = maxWaitMs;
            this.quietMs = quietMs;
        }

        @Override
        public void open(OpenContext context) {
            saturation = of(loopId);
            MetricGroup group = getRuntimeContext().getMetricGroup().addGroup("tensair");
            group.gauge("credit_wait_ms", (Gauge<Long>) () -> waitedNanos / 1_000_000L);
            group.gauge("credit_holds", (Gauge<Long>) () -> holds);
        }

        @Override
        public byte[] map(byte[] batch) throws InterruptedException {
            long waited = saturation.awaitUnsaturated(maxWaitMs, quietMs);
            if (waited > 0) {
                waitedNanos += waited;
                holds += 1;
            }
            return batch;
        }
    }

    /** Puts the replicas' reports into this JVM's view of the loop, for the gate beside it. */
    public static final class Receiver implements Sink<String> {
        private static final long serialVersionUID = 1L;
        private final String loopId;

        public Receiver(String loopId) {
            this.loopId = loopId;
        }

        @Override
        public SinkWriter<String> createWriter(WriterInitContext context) {
            Saturation saturation = of(loopId);
            saturation.start(context.getTaskInfo().getAttemptNumber());
            return new SinkWriter<String>() {
                @Override
                public void write(String report, Context ctx) {
                    apply(saturation, report);
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {}
            };
        }
    }
}
