import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientException;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

/**
 * RocketMQ's 5.x gRPC Java client (rocketmq-client-java) against a proxy's gRPC port, for the
 * timer interop tests (benches/peers/proxy.py compiles it against the pinned client):
 *
 * <pre>
 * send ENDPOINT TOPIC COUNT [DELAY_MS|-] [MESSAGE_GROUP]
 *   SENT seq messageId deliveryTimestamp recallHandle   (deliveryTimestamp, epoch ms, and
 *   FAILED seq exceptionClass message...                 recallHandle "-" when none)
 *   DONE sent
 * receive ENDPOINT TOPIC GROUP COUNT TIMEOUT_S [unacked-first]
 *   READY
 *   GOT messageId deliveryTimestamp receivedMs attempt body   (a SimpleConsumer's receive,
 *   DONE acked                                                  each delivery; "-" for no
 * </pre>                                                        timestamp)
 *
 * <p>receive acks every delivery, or with {@code unacked-first} every delivery but a message's
 * first, which comes back once its invisible duration (15 s) has passed. It ends when COUNT
 * messages were acked.
 *
 * Without DELAY_MS (or with "-") a plain send; with it each message's
 * {@code setDeliveryTimestamp(now + DELAY_MS)}; with MESSAGE_GROUP each message is of that FIFO
 * group. Bodies are {@code g-seq}. A recall handle (SendReceipt.getRecallHandle, which
 * clients after 5.0.7 have) is read by reflection, so the tool compiles against 5.0.7 and
 * prints it where a newer client gives one. A failed send is a line, not the end of the run:
 * a test reads what the proxy answered.
 */
public final class Grpc5 {
    private Grpc5() {
    }

    public static void main(String[] args) throws Exception {
        try {
            switch (args[0]) {
                case "send":
                    send(args[1], args[2], Integer.parseInt(args[3]),
                        args.length > 4 && !args[4].equals("-") ? Long.parseLong(args[4]) : -1,
                        args.length > 5 ? args[5] : null);
                    break;
                case "receive":
                    receive(args[1], args[2], args[3], Integer.parseInt(args[4]),
                        Long.parseLong(args[5]),
                        args.length > 6 && args[6].equals("unacked-first"));
                    break;
                default:
                    System.err.println("usage: Grpc5 send|receive ...");
                    System.exit(2);
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    static ClientConfiguration config(String endpoint) {
        return ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            .setRequestTimeout(Duration.ofSeconds(10))
            .build();
    }

    static String recallHandle(SendReceipt receipt) {
        try {
            Method m = receipt.getClass().getMethod("getRecallHandle");
            Object handle = m.invoke(receipt);
            return handle == null || handle.toString().isEmpty() ? "-" : handle.toString();
        } catch (ReflectiveOperationException e) {
            return "-";
        }
    }

    static void send(String endpoint, String topic, int count, long delayMs, String messageGroup)
        throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        try (Producer producer = provider.newProducerBuilder()
            .setClientConfiguration(config(endpoint))
            .setTopics(topic)
            .setMaxAttempts(1)
            .build()) {
            int sent = 0;
            for (int seq = 0; seq < count; seq++) {
                MessageBuilder builder = provider.newMessageBuilder()
                    .setTopic(topic)
                    .setKeys("k" + seq)
                    .setBody(("g-" + seq).getBytes(StandardCharsets.UTF_8));
                if (messageGroup != null) {
                    builder.setMessageGroup(messageGroup);
                }
                long at = -1;
                if (delayMs >= 0) {
                    at = System.currentTimeMillis() + delayMs;
                    builder.setDeliveryTimestamp(at);
                }
                try {
                    SendReceipt receipt = producer.send(builder.build());
                    System.out.println("SENT " + seq + " " + receipt.getMessageId() + " "
                        + (at < 0 ? "-" : Long.toString(at)) + " " + recallHandle(receipt));
                    sent++;
                } catch (ClientException | IllegalArgumentException e) {
                    // IllegalArgumentException: the client's own checks (a message type the
                    // route's topic does not accept) refuse it before it is sent.
                    System.out.println("FAILED " + seq + " " + e.getClass().getSimpleName() + " "
                        + String.valueOf(e.getMessage()).replace('\n', ' '));
                }
                System.out.flush();
            }
            System.out.println("DONE " + sent);
        }
    }

    static void receive(String endpoint, String topic, String group, int count, long timeoutS,
        boolean unackedFirst) throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        long deadline = System.currentTimeMillis() + timeoutS * 1000;
        Set<String> seen = new HashSet<>();
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder()
            .setClientConfiguration(config(endpoint))
            .setConsumerGroup(group)
            .setAwaitDuration(Duration.ofSeconds(2))
            .setSubscriptionExpressions(
                Collections.singletonMap(topic, FilterExpression.SUB_ALL))
            .build()) {
            System.out.println("READY");
            System.out.flush();
            while (seen.size() < count && System.currentTimeMillis() < deadline) {
                // The invisible duration: 10 s is the proxy's least (minInvisibleTimeMillsForRecv).
                List<MessageView> got = consumer.receive(16, Duration.ofSeconds(15));
                long now = System.currentTimeMillis();
                for (MessageView m : got) {
                    String id = m.getMessageId().toString();
                    byte[] body = new byte[m.getBody().remaining()];
                    m.getBody().duplicate().get(body);
                    System.out.println("GOT " + id + " "
                        + m.getDeliveryTimestamp().map(String::valueOf).orElse("-") + " "
                        + now + " " + m.getDeliveryAttempt() + " "
                        + new String(body, StandardCharsets.UTF_8));
                    System.out.flush();
                    if (unackedFirst && m.getDeliveryAttempt() == 1) {
                        continue;
                    }
                    consumer.ack(m);
                    seen.add(id);
                }
            }
            System.out.println("DONE " + seen.size());
        }
    }
}
