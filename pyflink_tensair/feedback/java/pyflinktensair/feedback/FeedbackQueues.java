package pyflinktensair.feedback;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;

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

    static void release(String loopId, int subtask, int attempt) {
        CHANNELS.remove(loopId + "/" + subtask + "/" + attempt);
    }

    private static int attemptOf(String key, String prefix) {
        return Integer.parseInt(key.substring(prefix.length()));
    }

    /** One unbounded, lock-free queue plus a future that wakes the reader when data arrives. */
    static final class Channel {
        private final ConcurrentLinkedQueue<byte[]> records = new ConcurrentLinkedQueue<>();
        private CompletableFuture<Void> available = new CompletableFuture<>(); // guarded by this

        void put(byte[] record) {
            records.add(record);
            CompletableFuture<Void> toComplete;
            synchronized (this) {
                toComplete = available;
            }
            toComplete.complete(null);
        }

        byte[] poll() {
            return records.poll();
        }

        /** Completes once the queue holds a record; never misses a put that races with it. */
        synchronized CompletableFuture<Void> availability() {
            if (!records.isEmpty()) {
                return CompletableFuture.completedFuture(null);
            }
            if (available.isDone()) {
                available = new CompletableFuture<>();
            }
            return available;
        }
    }
}
