import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.zip.CRC32;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.CommandCustomHeader;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * The Java client side of rocketha's interop tests (benches/peers/rocketmq.py compiles it
 * against the pinned RocketMQ client). One line of output per event, space separated, so the
 * Python side can parse it without a JSON library on the Java side:
 *
 * <pre>
 * produce NAMESRV TOPIC GROUP COUNT SIZE[,SIZE...]
 *   SENT seq status msgId offsetMsgId queueId queueOffset bodyLen bodyCrc32
 * consume NAMESRV TOPIC GROUP EXPECTED TIMEOUT_MS [CREATE_QUEUES]
 *   MSG queueId queueOffset commitLogOffset bodyLen bodyCrc32 tags
 *   DONE count
 * set-ha-master BROKER HA_ADDRESS          (5.x only)
 *   OK
 * </pre>
 *
 * Bodies are deterministic: message seq gets {@code body(seq, size)}, which the Python side
 * rebuilds to check what was stored. Tags cycle over t0, t1, t2; keys are k{seq}.
 */
public final class Peer {
    private Peer() {
    }

    /** The body of message {@code seq}: bytes of a Random seeded with seq (printable, so the
     * client's compression above 4 KiB does not change what a reader gets back). */
    static byte[] body(int seq, int size) {
        Random random = new Random(seq);
        byte[] out = new byte[size];
        for (int i = 0; i < size; i++) {
            out[i] = (byte) ('a' + random.nextInt(26));
        }
        return out;
    }

    static long crc(byte[] data) {
        CRC32 crc = new CRC32();
        crc.update(data, 0, data.length);
        return crc.getValue();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: Peer produce|consume ...");
            System.exit(2);
        }
        switch (args[0]) {
            case "produce":
                produce(args[1], args[2], args[3], Integer.parseInt(args[4]), args[5]);
                break;
            case "consume":
                int create = args.length > 6 ? Integer.parseInt(args[6]) : 0;
                consume(args[1], args[2], args[3], Integer.parseInt(args[4]),
                    Long.parseLong(args[5]), create);
                break;
            case "set-ha-master":
                setHaMaster(args[1], args[2]);
                break;
            default:
                System.err.println("unknown mode " + args[0]);
                System.exit(2);
        }
        System.exit(0);
    }

    static void produce(String namesrv, String topic, String group, int count, String sizes)
        throws Exception {
        String[] parts = sizes.split(",");
        int[] lengths = new int[parts.length];
        for (int i = 0; i < parts.length; i++) {
            lengths[i] = Integer.parseInt(parts[i]);
        }
        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(10000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setRetryAnotherBrokerWhenNotStoreOK(false);
        producer.start();
        try {
            for (int seq = 0; seq < count; seq++) {
                byte[] data = body(seq, lengths[seq % lengths.length]);
                Message msg = new Message(topic, "t" + (seq % 3), "k" + seq, data);
                SendResult r = producer.send(msg);
                System.out.println("SENT " + seq + " " + r.getSendStatus() + " " + r.getMsgId()
                    + " " + r.getOffsetMsgId() + " " + r.getMessageQueue().getQueueId() + " "
                    + r.getQueueOffset() + " " + data.length + " " + crc(data));
                System.out.flush();
            }
        } finally {
            producer.shutdown();
        }
    }

    /** createTopic(key, topic, queues) in 4.9; 5.x added a trailing attributes map. */
    static void createTopic(DefaultMQProducer admin, String topic, int queues) throws Exception {
        for (Method m : DefaultMQProducer.class.getMethods()) {
            if (!m.getName().equals("createTopic") || m.getParameterCount() < 3
                || m.getParameterTypes()[2] != int.class) {
                continue;
            }
            if (m.getParameterCount() == 3) {
                m.invoke(admin, "TBW102", topic, queues);
                return;
            }
            if (m.getParameterCount() == 4 && m.getParameterTypes()[3] == Map.class) {
                m.invoke(admin, "TBW102", topic, queues, null);
                return;
            }
        }
        throw new IllegalStateException("no createTopic(String, String, int[, Map]) found");
    }

    /**
     * Tells a 5.x slave broker its master's HA address with the admin request
     * EXCHANGE_BROKER_HA_INFO (what 5.x's own pre-online service sends). A 5.x slave drops the
     * haMasterAddress of its broker.conf: BrokerController.initialize() hands it to the HA
     * service before DefaultMessageStore.start() creates the HA client, which then connects to
     * "null" forever. Reflection keeps this file compiling against 4.9, which has neither
     * class (nor the bug).
     */
    static void setHaMaster(String broker, String haAddress) throws Exception {
        Class<?> codes = Class.forName("org.apache.rocketmq.remoting.protocol.RequestCode");
        int code = codes.getField("EXCHANGE_BROKER_HA_INFO").getInt(null);
        Class<?> headerClass = Class.forName(
            "org.apache.rocketmq.remoting.protocol.header.ExchangeHAInfoRequestHeader");
        Object header = headerClass.getConstructor().newInstance();
        headerClass.getMethod("setMasterHaAddress", String.class).invoke(header, haAddress);
        headerClass.getMethod("setMasterFlushOffset", Long.class).invoke(header, 0L);
        NettyRemotingClient client = new NettyRemotingClient(new NettyClientConfig());
        client.start();
        try {
            RemotingCommand request = RemotingCommand.createRequestCommand(code,
                (CommandCustomHeader) header);
            RemotingCommand response = client.invokeSync(broker, request, 10000);
            if (response.getCode() != 0) {
                throw new IllegalStateException("EXCHANGE_BROKER_HA_INFO: " + response);
            }
            System.out.println("OK");
        } finally {
            client.shutdown();
        }
    }

    static void consume(String namesrv, String topic, String group, int expected, long timeoutMs,
        int createQueues) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        if (createQueues > 0) {
            DefaultMQProducer admin = new DefaultMQProducer(group + "-admin");
            admin.setNamesrvAddr(namesrv);
            admin.start();
            try {
                createTopic(admin, topic, createQueues);
            } finally {
                admin.shutdown();
            }
        }
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setAutoCommit(false);
        consumer.start();
        int count = 0;
        try {
            Collection<MessageQueue> queues = null;
            while (queues == null || queues.isEmpty()) {
                try {
                    queues = consumer.fetchMessageQueues(topic);
                } catch (Exception e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                    Thread.sleep(200);
                }
            }
            List<MessageQueue> assigned = new ArrayList<>(queues);
            consumer.assign(assigned);
            for (MessageQueue mq : assigned) {
                consumer.seek(mq, 0);
            }
            while (count < expected && System.currentTimeMillis() < deadline) {
                for (MessageExt m : consumer.poll(1000)) {
                    byte[] data = m.getBody();
                    String tags = m.getTags() == null ? "-" : m.getTags();
                    System.out.println("MSG " + m.getQueueId() + " " + m.getQueueOffset() + " "
                        + m.getCommitLogOffset() + " " + data.length + " " + crc(data) + " "
                        + tags);
                    count++;
                }
                System.out.flush();
            }
        } finally {
            System.out.println("DONE " + count);
            System.out.flush();
            consumer.shutdown();
        }
    }
}
