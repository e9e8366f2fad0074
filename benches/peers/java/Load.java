import java.util.Arrays;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * The load generator of {@code rocketha bench remoting} (benches/peers/rocketmq.py compiles it
 * beside Peer.java against the pinned RocketMQ client):
 *
 * <pre>
 * Load NAMESRV BROKER TOPIC CONNECTIONS SECONDS SIZE [WARMUP_SECONDS [THREADS]]
 * </pre>
 *
 * TOPIC is first created on BROKER (host:port; "-" for none) as {@link Peer#prepareTopic}
 * does, so no send depends on auto-creation. Each producer's first send (before the clock
 * starts) fetches the route and opens its connection, and is repeated until SEND_OK for up to
 * 60 s: a SYNC_MASTER answers SLAVE_NOT_AVAILABLE until its slave caught up.
 *
 * CONNECTIONS {@code DefaultMQProducer}s, each with a distinct instanceName, so each has its
 * own MQClientInstance and hence its own connection to the broker (producers of one instance
 * share one), and THREADS sending threads (default CONNECTIONS), thread i on producer
 * i % CONNECTIONS: one thread per connection, or RocketMQ's own benchmark shape, one producer
 * shared by many threads and so many requests in flight on one connection. Each thread sends
 * SIZE-byte messages synchronously, one after the other; after WARMUP_SECONDS (default 1)
 * every thread counts its sends and their latencies for SECONDS. Prints Counts' JSON line:
 * {@code {"sent", "ok", "statuses", "p50_us", "p99_us", "p999_us", "seconds", "cpu_s"}}, where
 * ok counts SEND_OK, statuses every status (exceptions by class name) and cpu_s this client's
 * CPU time.
 */
public final class Load {
    private Load() {
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[2];
        int connections = Integer.parseInt(args[3]);
        double seconds = Double.parseDouble(args[4]);
        int size = Integer.parseInt(args[5]);
        double warmup = args.length > 6 ? Double.parseDouble(args[6]) : 1.0;
        int threads = args.length > 7 ? Integer.parseInt(args[7]) : connections;
        Peer.prepareTopic(namesrv, args[1], topic);
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'x');

        DefaultMQProducer[] producers = new DefaultMQProducer[connections];
        for (int i = 0; i < connections; i++) {
            DefaultMQProducer p = new DefaultMQProducer("bench-load");
            p.setNamesrvAddr(namesrv);
            p.setInstanceName("load-" + i + "-" + System.nanoTime());
            p.setVipChannelEnabled(false);
            p.setSendMsgTimeout(10000);
            p.setRetryTimesWhenSendFailed(0);
            p.setRetryAnotherBrokerWhenNotStoreOK(false);
            p.setCompressMsgBodyOverHowmuch(1 << 30);
            p.start();
            long deadline = System.currentTimeMillis() + 60000;
            while (true) {
                try {
                    if (p.send(new Message(topic, body)).getSendStatus() == SendStatus.SEND_OK) {
                        break;
                    }
                } catch (Exception e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("no SEND_OK in 60 s");
                }
                Thread.sleep(50);
            }
            producers[i] = p;
        }

        System.out.println(Counts.measure(threads, warmup, seconds,
            i -> producers[i % connections].send(new Message(topic, body)).getSendStatus().name()));
        System.out.flush();
        for (DefaultMQProducer p : producers) {
            p.shutdown();
        }
        System.exit(0);
    }
}
