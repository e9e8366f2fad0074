import java.util.HashSet;
import java.util.Set;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The consumer of {@code rocketha bench peers}' drain figure (benches/peers/rocketmq.py
 * compiles it beside Peer.java against the pinned RocketMQ client):
 *
 * <pre>
 * Drain NAMESRV TOPIC GROUP MESSAGES TIMEOUT_SECONDS
 * </pre>
 *
 * One {@code DefaultLitePullConsumer} of a new GROUP subscribed to every tag of TOPIC from its
 * first offset, as an application reads a backlog: pulls of 32 messages (the push consumer's
 * default and rocketha's {@code PullConsumer}'s), offsets committed automatically. Which broker
 * serves the pulls is the brokers' choice ({@code suggestWhichBrokerId}). It polls until it has
 * MESSAGES distinct messages and prints one JSON line: {@code {"messages", "bytes",
 * "seconds"}}: the clock starts when the first poll returns messages (so neither the JVM's
 * start nor the rebalance is counted), and bytes are the bodies returned after that.
 */
public final class Drain {
    private Drain() {
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        long messages = Long.parseLong(args[3]);
        long deadline = System.nanoTime() + (long) (Double.parseDouble(args[4]) * 1e9);
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPullBatchSize(32);
        consumer.subscribe(topic, "*");
        consumer.start();
        Set<Long> seen = new HashSet<>();
        long bytes = 0;
        long first = 0;
        long last = 0;
        try {
            while (seen.size() < messages) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(
                        "drained " + seen.size() + " of " + messages + " messages");
                }
                boolean timed = first != 0;
                for (MessageExt m : consumer.poll(1000)) {
                    // A rebalance may hand a queue's last pulls out twice: count each once.
                    if (seen.add(m.getCommitLogOffset()) && timed) {
                        bytes += m.getBody().length;
                    }
                }
                last = System.nanoTime();
                if (!timed && !seen.isEmpty()) {
                    first = last;
                }
            }
        } finally {
            consumer.shutdown();
        }
        System.out.println("{\"messages\": " + seen.size() + ", \"bytes\": " + bytes
            + ", \"seconds\": " + (last - first) / 1e9 + "}");
        System.exit(0);
    }
}
