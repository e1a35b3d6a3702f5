package pyflinktensair.feedback;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The in-JVM queues that join a feedback sink subtask to the feedback source subtask of the same
 * index. Both are pinned into one slot by a co-location group key, so they share this JVM.
 *
 * <p>A queue never blocks its writer: a bounded queue with backpressure inside a dataflow cycle
 * deadlocks. The replicas' staleness bound is what limits how much can be in flight.
 */
public final class FeedbackQueues {

    private static final ConcurrentHashMap<String, Channel> CHANNELS = new ConcurrentHashMap<>();

    private FeedbackQueues() {}

    /**
     * The channel of one task attempt. After a restart the sink and source of subtask i start as
     * attempt a + 1 together (the loop is one failover region), and whatever the old attempt left
     * in its queue was sent after the checkpoint the job restarts from: it must not be delivered.
     * Opening attempt a drops the channels of earlier attempts of the same subtask.
     */
    static Channel channel(String loopId, int subtask, int attempt) {
        String prefix = loopId + "/" + subtask + "/";
        CHANNELS.keySet().removeIf(key -> key.startsWith(prefix) && attemptOf(key, prefix) < attempt);
        return CHANNELS.computeIfAbsent(prefix + attempt, k -> new Channel());
    }

    /**
     * The channel of a relay (see {@link FeedbackSink#relay}): one per subtask whatever the
     * attempt, because its sink and source may restart apart (they need not share a failover
     * region, having no edge between them); what an earlier attempt left in it is the sink's to drop.
     */
    static Channel relayChannel(String relayId, int subtask) {
        return CHANNELS.computeIfAbsent(relayId + "/relay/" + subtask, k -> new Channel(RELAY_MAX_BYTES));
    }

    /**
     * What a relay's queue holds at most: beyond it the oldest records go (never the newest). A relay's reader can
     * miss records, and a relay whose source no sink reads (a job that never uses the stream)
     * must not grow without bound.
     */
    static final long RELAY_MAX_BYTES = 64L << 20;

    static void release(String loopId, int subtask, int attempt) {
        CHANNELS.remove(loopId + "/" + subtask + "/" + attempt);
    }

    private static int attemptOf(String key, String prefix) {
        return Integer.parseInt(key.substring(prefix.length()));
    }

    /** One lock-free queue plus a future that wakes the reader when data arrives. */
    static final class Channel {
        private final ConcurrentLinkedQueue<byte[]> records = new ConcurrentLinkedQueue<>();
        private final long maxBytes; // Long.MAX_VALUE: unbounded (a loop must never drop)
        private final AtomicLong bytes = new AtomicLong();
        private CompletableFuture<Void> available = new CompletableFuture<>(); // guarded by this
        private volatile boolean closed;

        Channel() {
            this(Long.MAX_VALUE);
        }

        Channel(long maxBytes) {
            this.maxBytes = maxBytes;
        }

        void put(byte[] record) {
            records.add(record);
            if (maxBytes != Long.MAX_VALUE && bytes.addAndGet(record.length) > maxBytes) {
                while (bytes.get() > maxBytes && records.peek() != record && poll() != null) {
                    // the oldest records go; the newest stays, however large
                }
            }
            wake();
        }

        /** No more records: the reader ends once it has taken what is queued. */
        void close() {
            closed = true;
            wake();
        }

        /** A new writer: what an earlier one left is dropped and the channel is open again. */
        void reopen() {
            while (poll() != null) {
                // dropped
            }
            closed = false;
        }

        boolean isClosed() {
            return closed;
        }

        private void wake() {
            CompletableFuture<Void> toComplete;
            synchronized (this) {
                toComplete = available;
            }
            toComplete.complete(null);
        }

        byte[] poll() {
            byte[] record = records.poll();
            if (record != null && maxBytes != Long.MAX_VALUE) {
                bytes.addAndGet(-record.length);
            }
            return record;
        }

        /** Completes once the queue holds a record; never misses a put that races with it. */
        synchronized CompletableFuture<Void> availability() {
            if (!records.isEmpty() || closed) {
                return CompletableFuture.completedFuture(null);
            }
            if (available.isDone()) {
                available = new CompletableFuture<>();
            }
            return available;
        }
    }
}
