import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Timer messages over remoting (RocketMQ 5's TimerMessageStore), for the timer interop tests
 * and {@code rocketha bench timer}: benches/peers/rocketmq.py compiles it beside Peer.java
 * against the pinned client, 4.9.7 as well as 5.4.0.
 *
 * <pre>
 * send NAMESRV BROKER TOPIC GROUP COUNT SIZE INFLIGHT MODE ARG RATE OUTPUT
 *   TSENT seq status msgId dueMs sentMs          (OUTPUT lines; dueMs 0 for MODE plain)
 *   TFAIL seq exceptionClass message...
 *   {"sent", "ok", "failed", "seconds", "rate", "first_ms", "last_ms", "cpu_s"}
 * receive NAMESRV TOPIC GROUP COUNT TIMEOUT_MS OUTPUT
 *   READY                                        (once the consumer holds every queue)
 *   TGOT msgId propertyMs dueMs receivedMs       (OUTPUT lines; propertyMs -1 when absent)
 *   {"received", "unique", "without_property", "lateness_ms": {"p50", "p99", "max", "min"}}
 *   DONE unique
 * </pre>
 *
 * MODE says what each message carries: {@code plain}, nothing (the baseline of the same
 * producer); {@code at}, TIMER_DELIVER_MS = ARG (epoch ms, the same for every message);
 * {@code ahead}, TIMER_DELIVER_MS = the send's time + ARG ms. The property is set as
 * {@code Message.setDeliverTimeMs} (5.x) sets it, through {@code MessageAccessor}, which 4.9.7
 * has too. Every body starts with the message's due time and seq ({@code due-seq-}, then 'x' up
 * to SIZE bytes), so a receiver measures lateness against what was asked even when a broker
 * dropped the property.
 *
 * The producer sends asynchronously with at most INFLIGHT sends unanswered, message i not
 * before RATE's schedule (start + i / RATE; RATE 0: as fast as the answers come), so one
 * producer reaches the broker's pace on two cores; with OUTPUT summary (a bench) it first
 * sends plain messages synchronously for {@value #WARMUP_MS} ms, off the clock. TOPIC is
 * created on BROKER first as {@link Peer#prepareTopic} does ("-": not). The consumer is a {@code DefaultMQPushConsumer}
 * from the first offset of a fresh group (a timer message lands in its topic at its due time,
 * long after the consumer started), lateness = receive time - due time, each message counted
 * once (a redelivery is not a second lateness).
 */
public final class TimerPeer {
    static final long WARMUP_MS = 2000;

    private TimerPeer() {
    }

    public static void main(String[] args) throws Exception {
        try {
            switch (args[0]) {
                case "send":
                    send(args);
                    break;
                case "receive":
                    receive(args);
                    break;
                default:
                    System.err.println("usage: TimerPeer send|receive ...");
                    System.exit(2);
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    /** {"max", "min", "p50", "p99"} of {@code sorted} as JSON ({} when empty). */
    static String quantiles(long[] sorted) {
        Map<String, Long> q = new TreeMap<>();
        int n = sorted.length;
        if (n > 0) {
            q.put("p50", Counts.quantile(sorted, 0.5));
            q.put("p99", Counts.quantile(sorted, 0.99));
            q.put("max", sorted[n - 1]);
            q.put("min", sorted[0]);
        }
        StringBuilder json = new StringBuilder("{");
        String sep = "";
        for (Map.Entry<String, Long> e : q.entrySet()) {
            json.append(sep).append('"').append(e.getKey()).append("\": ").append(e.getValue());
            sep = ", ";
        }
        return json.append("}").toString();
    }

    static byte[] body(long due, int seq, int size) {
        byte[] head = (due + "-" + seq + "-").getBytes(StandardCharsets.US_ASCII);
        byte[] out = new byte[Math.max(size, head.length)];
        Arrays.fill(out, (byte) 'x');
        System.arraycopy(head, 0, out, 0, head.length);
        return out;
    }

    static void send(String[] args) throws Exception {
        String namesrv = args[1];
        String topic = args[3];
        int count = Integer.parseInt(args[5]);
        int size = Integer.parseInt(args[6]);
        int inflight = Integer.parseInt(args[7]);
        String mode = args[8];
        long arg = Long.parseLong(args[9]);
        double rate = Double.parseDouble(args[10]);
        boolean lines = args[11].equals("lines");
        Peer.prepareTopic(namesrv, args[2], topic);

        DefaultMQProducer producer = new DefaultMQProducer(args[4]);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("timer-" + System.nanoTime());
        producer.setVipChannelEnabled(false);
        producer.setSendMsgTimeout(30000);
        producer.setRetryTimesWhenSendAsyncFailed(0);
        producer.setCompressMsgBodyOverHowmuch(1 << 30);
        producer.start();
        // The route, the connection and both JITs before the clock: plain messages to the same
        // topic for WARMUP_MS when measuring (a receiver skips them: due 0), nothing in a test
        // (its topic holds only what it asked for).
        if (!lines) {
            long until = System.currentTimeMillis() + WARMUP_MS;
            do {
                producer.send(new Message(topic, body(0, -1, size)));
            } while (System.currentTimeMillis() < until);
        }

        Semaphore slots = new Semaphore(inflight);
        AtomicInteger ok = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        AtomicLong lastAnswer = new AtomicLong();
        long cpuBefore = Counts.processCpuNanos();
        long started = System.nanoTime();
        long firstMs = System.currentTimeMillis();
        for (int i = 0; i < count; i++) {
            if (rate > 0) {
                long at = started + (long) (i * 1e9 / rate);
                long wait = at - System.nanoTime();
                if (wait > 0) {
                    TimeUnit.NANOSECONDS.sleep(wait);
                }
            }
            slots.acquire();
            long now = System.currentTimeMillis();
            long due = mode.equals("at") ? arg : mode.equals("ahead") ? now + arg : 0;
            Message msg = new Message(topic, body(due, i, size));
            if (due > 0) {
                MessageAccessor.putProperty(msg, "TIMER_DELIVER_MS", Long.toString(due));
            }
            final int seq = i;
            producer.send(msg, new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    if (r.getSendStatus().name().equals("SEND_OK")) {
                        ok.incrementAndGet();
                    } else {
                        failed.incrementAndGet();
                    }
                    if (lines) {
                        System.out.println("TSENT " + seq + " " + r.getSendStatus() + " "
                            + r.getMsgId() + " " + due + " " + now);
                    }
                    lastAnswer.set(System.nanoTime());
                    slots.release();
                }

                @Override
                public void onException(Throwable e) {
                    failed.incrementAndGet();
                    System.out.println("TFAIL " + seq + " " + e.getClass().getSimpleName() + " "
                        + String.valueOf(e.getMessage()).replace('\n', ' '));
                    lastAnswer.set(System.nanoTime());
                    slots.release();
                }
            }, 30000);
        }
        slots.acquire(inflight);
        double seconds = (lastAnswer.get() - started) / 1e9;
        double cpu = (Counts.processCpuNanos() - cpuBefore) / 1e9;
        System.out.println("{\"sent\": " + count + ", \"ok\": " + ok.get() + ", \"failed\": "
            + failed.get() + ", \"seconds\": " + seconds + ", \"rate\": " + ok.get() / seconds
            + ", \"first_ms\": " + firstMs + ", \"last_ms\": " + System.currentTimeMillis()
            + ", \"cpu_s\": " + cpu + "}");
        System.out.flush();
        producer.shutdown();
    }

    static void receive(String[] args) throws Exception {
        String namesrv = args[1];
        String topic = args[2];
        int count = Integer.parseInt(args[4]);
        long timeoutMs = Long.parseLong(args[5]);
        boolean lines = args[6].equals("lines");
        // Lateness by message id, the first delivery's only; a long array of lateness too,
        // in the order they came, for the quantiles.
        Set<String> seen = ConcurrentHashMap.newKeySet();
        long[] lateness = new long[count];
        // The broker's part: store time (the delivered copy's) - due time.
        long[] stored = new long[count];
        AtomicInteger unique = new AtomicInteger();
        AtomicInteger received = new AtomicInteger();
        AtomicInteger withoutProperty = new AtomicInteger();
        Object done = new Object();

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args[3]);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("timer-receive-" + System.nanoTime());
        consumer.setVipChannelEnabled(false);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(Peer.ROUTE_POLL_MS);
        consumer.setHeartbeatBrokerInterval(Peer.HEARTBEAT_MS);
        consumer.setConsumeMessageBatchMaxSize(32);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                received.incrementAndGet();
                String property = m.getProperty("TIMER_DELIVER_MS");
                String text = new String(m.getBody(), 0, Math.min(40, m.getBody().length),
                    StandardCharsets.US_ASCII);
                // A body another client wrote (the gRPC client's, through a proxy) says
                // nothing of its due time: the property does.
                long due;
                try {
                    due = Long.parseLong(text.substring(0, text.indexOf('-')));
                } catch (RuntimeException e) {
                    due = property == null ? 0 : Long.parseLong(property);
                }
                if (due <= 0 || !seen.add(m.getMsgId())) {
                    continue; // a warm-up message, or a redelivery
                }
                if (property == null) {
                    withoutProperty.incrementAndGet();
                }
                int at = unique.getAndIncrement();
                if (at < count) {
                    lateness[at] = now - due;
                    stored[at] = m.getStoreTimestamp() - due;
                }
                if (lines) {
                    System.out.println("TGOT " + m.getMsgId() + " "
                        + (property == null ? "-1" : property) + " " + due + " " + now);
                }
                if (at + 1 >= count) {
                    synchronized (done) {
                        done.notifyAll();
                    }
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        long deadline = System.currentTimeMillis() + timeoutMs;
        // READY once the consumer was assigned every queue of the topic and pulls them: a
        // timer due before then would be measured late by the consumer's start, not the broker.
        while (consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable()
            .isEmpty()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("no queue of " + topic + " assigned");
            }
            Thread.sleep(10);
        }
        System.out.println("READY");
        System.out.flush();
        synchronized (done) {
            while (unique.get() < count && System.currentTimeMillis() < deadline) {
                done.wait(Math.max(1, deadline - System.currentTimeMillis()));
            }
        }
        consumer.shutdown();
        int n = Math.min(unique.get(), count);
        long[] sorted = Arrays.copyOf(lateness, n);
        Arrays.sort(sorted);
        long[] storedSorted = Arrays.copyOf(stored, n);
        Arrays.sort(storedSorted);
        StringBuilder json = new StringBuilder("{\"received\": " + received.get()
            + ", \"unique\": " + n + ", \"without_property\": " + withoutProperty.get()
            + ", \"lateness_ms\": " + quantiles(sorted)
            + ", \"stored_lateness_ms\": " + quantiles(storedSorted));
        System.out.println(json.append("}"));
        System.out.println("DONE " + n);
        System.out.flush();
    }
}
