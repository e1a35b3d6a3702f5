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

    static Channel channel(String loopId, int subtask) {
        return CHANNELS.computeIfAbsent(loopId + "/" + subtask, k -> new Channel());
    }

    static void release(String loopId, int subtask) {
        CHANNELS.remove(loopId + "/" + subtask);
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
