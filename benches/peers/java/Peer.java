import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.CommandCustomHeader;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The Java client side of rocketha's interop tests (benches/peers/rocketmq.py compiles it
 * against the pinned RocketMQ client). One line of output per event, space separated, so the
 * Python side can parse it without a JSON library on the Java side:
 *
 * <pre>
 * produce NAMESRV BROKER TOPIC GROUP COUNT SIZE[,SIZE...] [DELAY_EVERY]
 *   SENT seq status msgId offsetMsgId queueId queueOffset bodyLen bodyCrc32 delayLevel
 * consume NAMESRV BROKER TOPIC GROUP EXPECTED TIMEOUT_MS
 *   MSG queueId queueOffset commitLogOffset bodyLen bodyCrc32 tags
 *   DONE count
 * send NAMESRV BROKER TOPIC GROUP STYLE COUNT PREFIX   (STYLE: sync|async|oneway|batch)
 *   RESULT seq status msgId offsetMsgId queueId queueOffset   (batch: one line, seq -1)
 *   ERROR seq exceptionClass message...
 *   ONEWAY seq
 *   DONE
 * set-ha-master BROKER HA_ADDRESS          (5.x only)
 *   OK
 * group NAMESRV TOPIC GROUP KIND AT_LEAST TIMEOUT_MS [SQL92]   (KIND: lite|push; AT_LEAST 0:
 *   GOT queueId queueOffset body                    until stdin closes; SQL92: subscribed
 *                                                   by MessageSelector.bySql, else "*")
 *   MEMBERS n                (each rebalance: the group's member count it saw)
 *   DONE count
 * create-topic NAMESRV KEY TOPIC QUEUES   (DefaultMQAdminExt.createTopic(KEY, ...): KEY is
 *   a cluster or broker name, whose topic route names the brokers; then examineTopicStats)
 *   STATS brokerName queueId minOffset maxOffset
 *   DONE
 * query NAMESRV TOPIC KEYS LOOKUPS   (DefaultMQAdminExt.queryMessage of random keys k0..
 *   k{KEYS-1}, each timed, after one untimed lookup that warms the route and connections)
 *   LOOKUP micros found
 *   DONE
 * send-props NAMESRV TOPIC GROUP PROPS...   (one message a PROPS, "k=v;k2=v2" as user
 *   RESULT seq status msgId offsetMsgId queueId queueOffset   properties, body "p-seq")
 *   DONE
 * acl NAMESRV TOPIC FORBIDDEN_TOPIC GROUP ACCESS_KEY SECRET_KEY   (AclClientRPCHook)
 *   RESULT 0 ...             (the right keys, TOPIC; body acl-0)
 *   REFUSED 1 code remark    (a wrong secret key, TOPIC; body acl-1)
 *   REFUSED 2 code remark    (the right keys, FORBIDDEN_TOPIC; body acl-2)
 *   MSG ... / DONE count     (the right keys consume TOPIC as GROUP, as consume does)
 * transact NAMESRV BROKER TOPIC GROUP DEADLINE_MS [STATE...]   (TransactionMQProducer: one
 *   READY                     transaction a STATE, then one a line of stdin, until stdin
 *   RELEASED                  closes or DEADLINE_MS passes; a line RELEASE: held-then-commit
 *                             transactions commit at their next check-back)
 *   TXSENT seq key status localState msgId transactionId offsetMsgId queueId queueOffset
 *   TXERROR seq key code exceptionClass message...
 *   CHECK key transactionId times answer msgId queueOffset commitLogOffset props
 *   DONE sent checks
 * stream NAMESRV BROKER TOPIC GROUP PREFIX PAUSE_MS ROUTE_POLL_MS   (DefaultMQProducer, no
 *   READY                     retries: synchronous sends one after the other, PAUSE_MS
 *                             apart, until stdin closes; its routes refreshed every
 *                             ROUTE_POLL_MS; micros: epoch microseconds the send returned)
 *   ACKED seq status msgId offsetMsgId queueId queueOffset micros
 *   FAILED seq micros exceptionClass message...
 *   DONE sent acked
 * </pre>
 *
 * Bodies are deterministic: message seq gets {@code body(seq, size)}, which the Python side
 * rebuilds to check what was stored. Tags cycle over t0, t1, t2; keys are k{seq}. With
 * DELAY_EVERY n, every n-th message is sent with delay level {@value #DELAY_LEVEL} (30 s): the
 * broker stores it in SCHEDULE_TOPIC_XXXX until then. {@code send} bodies are the text
 * PREFIX-seq instead, so a store can be searched for them by body.
 *
 * <p>With BROKER (host:port; "-" for none) the topic is first created on that broker with
 * {@value #QUEUES} queues (UPDATE_AND_CREATE_TOPIC), which also makes the broker register
 * with the name server at once: a 5.x broker's own first registration comes about 10 s after
 * it booted (the one at start-up races the scan that finds a reachable name server).
 */
public final class Peer {
    static final int QUEUES = 4;
    static final int DELAY_LEVEL = 4;
    static final long ROUTE_TIMEOUT_MS = 30000;
    /**
     * A group member's route refresh (pollNameServerInterval, 30 s by default): the name
     * server drops a dead master's route at once, but a member only stops pulling from it
     * (a 3 s back-off after each refused pull) once it refreshes, and only finds a returned
     * master then. Tests kill and restart masters; their members need not wait 30 s for it.
     */
    static final int ROUTE_POLL_MS = 1000;
    /**
     * A group member's heartbeat (heartbeatBrokerInterval, 30 s by default). A rebalance that
     * changes a member's queues gives its subscription a new subVersion and sends a heartbeat
     * only if no other is under way (tryLock); when the scheduled one holds the lock, the
     * broker keeps the old version and answers the member's pulls SUBSCRIPTION_NOT_LATEST
     * until the next heartbeat. A RocketMQ client race, the same against RocketMQ's broker;
     * tests need not wait 30 s for it.
     */
    static final int HEARTBEAT_MS = 1000;

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
        try {
            run(args);
        } catch (Exception e) {
            // A client that failed to start leaves its threads running: exit, saying why.
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    static void run(String[] args) throws Exception {
        switch (args[0]) {
            case "produce":
                prepareTopic(args[1], args[2], args[3]);
                int delayEvery = args.length > 7 ? Integer.parseInt(args[7]) : 0;
                produce(args[1], args[3], args[4], Integer.parseInt(args[5]), args[6],
                    delayEvery);
                break;
            case "consume":
                prepareTopic(args[1], args[2], args[3]);
                consume(args[1], args[3], args[4], Integer.parseInt(args[5]),
                    Long.parseLong(args[6]));
                break;
            case "send":
                prepareTopic(args[1], args[2], args[3]);
                send(args[1], args[3], args[4], args[5], Integer.parseInt(args[6]), args[7]);
                break;
            case "set-ha-master":
                setHaMaster(args[1], args[2]);
                break;
            case "group":
                MessageSelector selector = args.length > 7
                    ? MessageSelector.bySql(args[7]) : MessageSelector.byTag("*");
                group(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]),
                    Long.parseLong(args[6]), selector);
                break;
            case "send-props":
                sendProps(args[1], args[2], args[3],
                    java.util.Arrays.copyOfRange(args, 4, args.length));
                break;
            case "reconsume":
                reconsume(args[1], args[2], args[3], Integer.parseInt(args[4]),
                    Integer.parseInt(args[5]), Long.parseLong(args[6]));
                break;
            case "acl":
                acl(args[1], args[2], args[3], args[4], args[5], args[6]);
                break;
            case "create-topic":
                createTopic(args[1], args[2], args[3], Integer.parseInt(args[4]));
                break;
            case "query":
                query(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
                break;
            case "transact":
                prepareTopic(args[1], args[2], args[3]);
                transact(args[1], args[3], args[4], Long.parseLong(args[5]),
                    java.util.Arrays.copyOfRange(args, 6, args.length));
                break;
            case "stream":
                prepareTopic(args[1], args[2], args[3]);
                stream(args[1], args[3], args[4], args[5], Integer.parseInt(args[6]),
                    Integer.parseInt(args[7]));
                break;
            default:
                System.err.println("unknown mode " + args[0]);
                System.exit(2);
        }
    }

    static void produce(String namesrv, String topic, String group, int count, String sizes,
        int delayEvery) throws Exception {
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
                int delay = delayEvery > 0 && seq % delayEvery == delayEvery - 1 ? DELAY_LEVEL : 0;
                if (delay > 0) {
                    msg.setDelayTimeLevel(delay);
                }
                SendResult r = producer.send(msg);
                System.out.println("SENT " + seq + " " + r.getSendStatus() + " " + r.getMsgId()
                    + " " + r.getOffsetMsgId() + " " + r.getMessageQueue().getQueueId() + " "
                    + r.getQueueOffset() + " " + data.length + " " + crc(data) + " " + delay);
                System.out.flush();
            }
        } finally {
            producer.shutdown();
        }
    }

    static synchronized void printResult(int seq, SendResult r) {
        System.out.println("RESULT " + seq + " " + r.getSendStatus() + " " + r.getMsgId() + " "
            + r.getOffsetMsgId() + " " + r.getMessageQueue().getQueueId() + " "
            + r.getQueueOffset());
        System.out.flush();
    }

    static synchronized void printError(int seq, Throwable e) {
        String text = String.valueOf(e.getMessage()).replace('\n', ' ');
        System.out.println("ERROR " + seq + " " + e.getClass().getName() + " " + text);
        System.out.flush();
    }

    /**
     * Sends COUNT messages (bodies PREFIX-seq, tag t{seq % 3}, key k{seq}) in one STYLE:
     * sync (one at a time), async (all at once, each result from its callback), oneway (no
     * result) or batch (one send of all of them). A failed send prints ERROR, not a stack.
     */
    static void send(String namesrv, String topic, String group, String style, int count,
        String prefix) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("interop-send-" + System.nanoTime());
        producer.setVipChannelEnabled(false);
        producer.setSendMsgTimeout(15000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setRetryTimesWhenSendAsyncFailed(0);
        producer.setRetryAnotherBrokerWhenNotStoreOK(false);
        producer.start();
        try {
            List<Message> msgs = new ArrayList<>();
            for (int seq = 0; seq < count; seq++) {
                byte[] data = (prefix + "-" + seq).getBytes("UTF-8");
                msgs.add(new Message(topic, "t" + (seq % 3), "k" + seq, data));
            }
            switch (style) {
                case "sync":
                    for (int seq = 0; seq < count; seq++) {
                        try {
                            printResult(seq, producer.send(msgs.get(seq)));
                        } catch (Exception e) {
                            printError(seq, e);
                        }
                    }
                    break;
                case "async":
                    CountDownLatch done = new CountDownLatch(count);
                    for (int seq = 0; seq < count; seq++) {
                        final int s = seq;
                        try {
                            producer.send(msgs.get(seq), new SendCallback() {
                                @Override
                                public void onSuccess(SendResult r) {
                                    printResult(s, r);
                                    done.countDown();
                                }

                                @Override
                                public void onException(Throwable e) {
                                    printError(s, e);
                                    done.countDown();
                                }
                            });
                        } catch (Exception e) {
                            printError(s, e);
                            done.countDown();
                        }
                    }
                    if (!done.await(60, TimeUnit.SECONDS)) {
                        System.out.println("ERROR -1 Timeout " + done.getCount() + " callbacks");
                    }
                    break;
                case "oneway":
                    for (int seq = 0; seq < count; seq++) {
                        try {
                            producer.sendOneway(msgs.get(seq));
                            System.out.println("ONEWAY " + seq);
                        } catch (Exception e) {
                            printError(seq, e);
                        }
                    }
                    break;
                case "batch":
                    try {
                        printResult(-1, producer.send(msgs));
                    } catch (Exception e) {
                        printError(-1, e);
                    }
                    break;
                default:
                    throw new IllegalArgumentException("unknown style " + style);
            }
            System.out.println("DONE");
            System.out.flush();
        } finally {
            producer.shutdown();
        }
    }

    /** Epoch microseconds: comparable with the clock of the process that reads the lines. */
    static long epochMicros() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1000;
    }

    /**
     * Sends message after message (bodies PREFIX-seq, tag t{seq % 3}, key k{seq}), each
     * synchronously and once (no retry: a failed send is printed, and the next seq is a new
     * message), PAUSE_MS apart, until standard input closes: a producer that goes on while a
     * test kills and restarts brokers under it. Each send's return is timed (epoch micros),
     * so a reader can tell when sends came back after a failover. Routes are refreshed every
     * ROUTE_POLL_MS (RocketMQ's default is 30 s, which a failover would otherwise wait for).
     */
    static void stream(String namesrv, String topic, String group, String prefix, int pauseMs,
        int routePollMs) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("interop-stream-" + System.nanoTime());
        producer.setVipChannelEnabled(false);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setRetryAnotherBrokerWhenNotStoreOK(false);
        producer.setPollNameServerInterval(routePollMs);
        producer.setHeartbeatBrokerInterval(HEARTBEAT_MS);
        producer.start();
        CountDownLatch closed = new CountDownLatch(1);
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // Only the end of input counts.
                }
            } catch (java.io.IOException e) {
                // A closed input is the signal either way.
            }
            closed.countDown();
        });
        stdin.setDaemon(true);
        stdin.start();
        System.out.println("READY");
        System.out.flush();
        int seq = 0;
        int acked = 0;
        try {
            while (closed.getCount() > 0) {
                byte[] data = (prefix + "-" + seq).getBytes(StandardCharsets.UTF_8);
                Message msg = new Message(topic, "t" + (seq % 3), "k" + seq, data);
                try {
                    SendResult r = producer.send(msg);
                    acked += r.getSendStatus() == SendStatus.SEND_OK ? 1 : 0;
                    System.out.println("ACKED " + seq + " " + r.getSendStatus() + " "
                        + r.getMsgId() + " " + r.getOffsetMsgId() + " "
                        + r.getMessageQueue().getQueueId() + " " + r.getQueueOffset() + " "
                        + epochMicros());
                } catch (Exception e) {
                    String text = String.valueOf(e.getMessage()).replace('\n', ' ');
                    System.out.println("FAILED " + seq + " " + epochMicros() + " "
                        + e.getClass().getName() + " " + text);
                }
                System.out.flush();
                seq++;
                closed.await(pauseMs, TimeUnit.MILLISECONDS);
            }
        } finally {
            producer.shutdown();
        }
        System.out.println("DONE " + seq + " " + acked);
        System.out.flush();
    }

    /** The user property naming what a {@code transact} message's local transaction does. */
    static final String TX_LOCAL = "txLocal";
    /** Set by a RELEASE line: {@code held-then-commit} transactions commit from then on. */
    static volatile boolean released;

    /**
     * What the local transaction of a message whose {@value #TX_LOCAL} is {@code state}
     * answers: at once ({@code check} false, executeLocalTransaction) or to the broker's
     * check-back ({@code check} true, checkLocalTransaction). {@code commit} and
     * {@code rollback} answer the same both times (a check-back of one is the broker's
     * business, printed like any other); {@code held-then-commit} answers UNKNOW until the
     * process reads a RELEASE line, COMMIT_MESSAGE to the check-backs after it.
     */
    static LocalTransactionState localState(String state, boolean check) {
        switch (state) {
            case "commit":
                return LocalTransactionState.COMMIT_MESSAGE;
            case "rollback":
                return LocalTransactionState.ROLLBACK_MESSAGE;
            case "unknown-then-commit":
                return check ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.UNKNOW;
            case "unknown-then-rollback":
                return check ? LocalTransactionState.ROLLBACK_MESSAGE
                    : LocalTransactionState.UNKNOW;
            case "unknown-forever":
                return LocalTransactionState.UNKNOW;
            case "held-then-commit":
                return check && released ? LocalTransactionState.COMMIT_MESSAGE
                    : LocalTransactionState.UNKNOW;
            default:
                throw new IllegalArgumentException("unknown local transaction " + state);
        }
    }

    /** "k=v&k2=v2", each part URL-encoded, sorted by key: a whole property map on one line. */
    static String encodeProps(Map<String, String> props) {
        StringBuilder out = new StringBuilder();
        for (Map.Entry<String, String> e : new TreeMap<>(props).entrySet()) {
            if (out.length() > 0) {
                out.append('&');
            }
            out.append(URLEncoder.encode(e.getKey(), StandardCharsets.UTF_8)).append('=')
                .append(URLEncoder.encode(String.valueOf(e.getValue()), StandardCharsets.UTF_8));
        }
        return out.length() == 0 ? "-" : out.toString();
    }

    /**
     * A {@code TransactionMQProducer} of GROUP whose {@code TransactionListener} does what
     * each message's {@value #TX_LOCAL} property says ({@link #localState}). It sends one
     * transaction a STATE argument, then one a line of its standard input (the line is the
     * state), message seq with key and body {@code seq-STATE}, tag {@code tx}. Each send prints
     * TXSENT (or TXERROR: the broker's response code, -1 when the failure is not the broker's
     * answer); a line RELEASE sends nothing, it releases the held transactions (RELEASED); each check-back the broker sends prints CHECK with how many times this process
     * was asked about that key so far, the answer given, the checked message's msgId, queue
     * offset and commit log offset (those of the half message the broker checks) and its
     * whole property map. It keeps running, so check-backs can come, until its standard input
     * closes or DEADLINE_MS passes; then it shuts the producer down and prints DONE.
     */
    static void transact(String namesrv, String topic, String group, long deadlineMs,
        String[] states) throws Exception {
        long deadline = System.currentTimeMillis() + deadlineMs;
        Map<String, AtomicInteger> checked = new ConcurrentHashMap<>();
        AtomicInteger checks = new AtomicInteger();
        TransactionMQProducer producer = new TransactionMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("interop-tx-" + System.nanoTime());
        producer.setVipChannelEnabled(false);
        producer.setSendMsgTimeout(15000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setRetryAnotherBrokerWhenNotStoreOK(false);
        // Check-backs go to a producer channel the broker learnt from a heartbeat: a broker
        // restarted while this runs learns it again within a second, not 30.
        producer.setHeartbeatBrokerInterval(HEARTBEAT_MS);
        producer.setPollNameServerInterval(ROUTE_POLL_MS);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return localState(msg.getUserProperty(TX_LOCAL), false);
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                String state = msg.getUserProperty(TX_LOCAL);
                LocalTransactionState answer = state == null
                    ? LocalTransactionState.UNKNOW : localState(state, true);
                String key = msg.getKeys() == null ? "-" : msg.getKeys();
                int times = checked.computeIfAbsent(key, k -> new AtomicInteger())
                    .incrementAndGet();
                checks.incrementAndGet();
                synchronized (Peer.class) {
                    System.out.println("CHECK " + key + " " + msg.getTransactionId() + " "
                        + times + " " + answer + " " + msg.getMsgId() + " "
                        + msg.getQueueOffset() + " " + msg.getCommitLogOffset() + " "
                        + encodeProps(msg.getProperties()));
                    System.out.flush();
                }
                return answer;
            }
        });
        producer.start();
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        for (String state : states) {
            lines.add(state);
        }
        Thread stdin = new Thread(() -> {
            try {
                BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8));
                String line;
                while ((line = in.readLine()) != null) {
                    if (!line.isBlank()) {
                        lines.add(line.trim());
                    }
                }
            } catch (java.io.IOException e) {
                // A closed input is the signal either way.
            }
            lines.add("");
        });
        stdin.setDaemon(true);
        stdin.start();
        synchronized (Peer.class) {
            System.out.println("READY");
            System.out.flush();
        }
        int seq = 0;
        try {
            while (true) {
                long left = deadline - System.currentTimeMillis();
                String state = left > 0 ? lines.poll(left, TimeUnit.MILLISECONDS) : null;
                if (state == null || state.isEmpty()) {
                    break;
                }
                if (state.equals("RELEASE")) {
                    released = true;
                    synchronized (Peer.class) {
                        System.out.println("RELEASED");
                        System.out.flush();
                    }
                    continue;
                }
                String key = seq + "-" + state;
                Message msg = new Message(topic, "tx", key, key.getBytes(StandardCharsets.UTF_8));
                msg.putUserProperty(TX_LOCAL, state);
                try {
                    TransactionSendResult r = producer.sendMessageInTransaction(msg, null);
                    synchronized (Peer.class) {
                        System.out.println("TXSENT " + seq + " " + key + " " + r.getSendStatus()
                            + " " + r.getLocalTransactionState() + " " + r.getMsgId() + " "
                            + r.getTransactionId() + " " + r.getOffsetMsgId() + " "
                            + r.getMessageQueue().getQueueId() + " " + r.getQueueOffset());
                        System.out.flush();
                    }
                } catch (Exception e) {
                    Throwable cause = e;
                    while (cause != null && !(cause instanceof MQBrokerException)) {
                        cause = cause.getCause();
                    }
                    int code = cause == null ? -1 : ((MQBrokerException) cause).getResponseCode();
                    Throwable shown = cause == null ? e : cause;
                    String text = String.valueOf(shown.getMessage()).replace('\n', ' ');
                    synchronized (Peer.class) {
                        System.out.println("TXERROR " + seq + " " + key + " " + code + " "
                            + shown.getClass().getName() + " " + text);
                        System.out.flush();
                    }
                }
                seq++;
            }
        } finally {
            producer.shutdown();
        }
        synchronized (Peer.class) {
            System.out.println("DONE " + seq + " " + checks.get());
            System.out.flush();
        }
    }

    /** Creates {@code topic} on {@code broker} (unless "-") and waits for its route. */
    /** One synchronous send a PROPS argument, its user properties set from "k=v;k2=v2". */
    static void sendProps(String namesrv, String topic, String group, String[] props)
        throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("interop-props-" + System.nanoTime());
        producer.setRetryTimesWhenSendFailed(0);
        // A broker sharing two cores with a loaded suite can take longer than the default 3 s.
        producer.setSendMsgTimeout(10000);
        producer.start();
        try {
            for (int seq = 0; seq < props.length; seq++) {
                Message msg = new Message(topic, ("p-" + seq).getBytes("UTF-8"));
                for (String pair : props[seq].split(";")) {
                    int at = pair.indexOf('=');
                    if (at <= 0) {
                        continue;
                    }
                    String key = pair.substring(0, at);
                    if (key.equals("TAGS")) {
                        msg.setTags(pair.substring(at + 1));  // reserved: not a user property
                    } else {
                        msg.putUserProperty(key, pair.substring(at + 1));
                    }
                }
                SendResult r = producer.send(msg);
                System.out.println("RESULT " + seq + " " + r.getSendStatus() + " "
                    + r.getMsgId() + " " + r.getOffsetMsgId() + " "
                    + r.getMessageQueue().getQueueId() + " " + r.getQueueOffset());
            }
        } finally {
            producer.shutdown();
        }
        System.out.println("DONE");
    }

    static void prepareTopic(String namesrv, String broker, String topic) throws Exception {
        if (broker.equals("-")) {
            return;
        }
        DefaultMQAdminExt admin = new DefaultMQAdminExt("interop-admin");
        admin.setInstanceName("interop-admin-" + System.nanoTime());
        admin.setNamesrvAddr(namesrv);
        admin.start();
        try {
            admin.createAndUpdateTopicConfig(broker, new TopicConfig(topic, QUEUES, QUEUES, 6));
            long deadline = System.currentTimeMillis() + ROUTE_TIMEOUT_MS;
            while (true) {
                try {
                    if (!admin.examineTopicRouteInfo(topic).getBrokerDatas().isEmpty()) {
                        return;
                    }
                } catch (Exception e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                }
                Thread.sleep(100);
            }
        } finally {
            admin.shutdown();
        }
    }

    /** What admin code written for RocketMQ calls to create a topic on a cluster. */
    static void query(String namesrv, String topic, int keys, int lookups) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt("bench-query");
        admin.setInstanceName("bench-query-" + System.nanoTime());
        admin.setNamesrvAddr(namesrv);
        admin.start();
        try {
            admin.queryMessage(topic, "k0", 32, 0, Long.MAX_VALUE);
            Random random = new Random(7);
            for (int i = 0; i < lookups; i++) {
                String key = "k" + random.nextInt(keys);
                long started = System.nanoTime();
                int found = admin.queryMessage(topic, key, 32, 0, Long.MAX_VALUE)
                    .getMessageList().size();
                System.out.println("LOOKUP " + (System.nanoTime() - started) / 1000 + " " + found);
            }
            System.out.println("DONE");
        } finally {
            admin.shutdown();
        }
    }

    static void createTopic(String namesrv, String key, String topic, int queues)
        throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt("interop-admin");
        admin.setInstanceName("interop-admin-" + System.nanoTime());
        admin.setNamesrvAddr(namesrv);
        admin.start();
        try {
            // 4.9's createTopic(key, topic, queues); 5.x adds the topic's attributes.
            try {
                DefaultMQAdminExt.class.getMethod("createTopic", String.class, String.class,
                    int.class).invoke(admin, key, topic, queues);
            } catch (NoSuchMethodException e) {
                DefaultMQAdminExt.class.getMethod("createTopic", String.class, String.class,
                    int.class, java.util.Map.class)
                    .invoke(admin, key, topic, queues, new java.util.HashMap<String, String>());
            }
            long deadline = System.currentTimeMillis() + ROUTE_TIMEOUT_MS;
            while (true) {
                try {
                    // TopicStatsTable moved package in 5.x; var keeps both compiling.
                    var stats = admin.examineTopicStats(topic).getOffsetTable();
                    for (var e : stats.entrySet()) {
                        System.out.println("STATS " + e.getKey().getBrokerName() + " "
                            + e.getKey().getQueueId() + " " + e.getValue().getMinOffset() + " "
                            + e.getValue().getMaxOffset());
                    }
                    System.out.println("DONE");
                    return;
                } catch (Exception e) {
                    // The route of a topic just created reaches the name server a moment later.
                    if (System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                }
                Thread.sleep(100);
            }
        } finally {
            admin.shutdown();
        }
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

    /**
     * Three sends through AclClientRPCHook, each with a producer of its own (seq 0: the right
     * keys; 1: a wrong secret key; 2: the right keys, a topic the account may not publish to),
     * then the right keys consume TOPIC. A refusal prints the broker's response code and remark.
     */
    static void acl(String namesrv, String topic, String forbidden, String group,
        String accessKey, String secretKey) throws Exception {
        String[][] cases = {
            {secretKey, topic}, {secretKey + "-wrong", topic}, {secretKey, forbidden},
        };
        for (int seq = 0; seq < cases.length; seq++) {
            RPCHook hook = new AclClientRPCHook(new SessionCredentials(accessKey, cases[seq][0]));
            DefaultMQProducer producer = new DefaultMQProducer(group, hook);
            producer.setNamesrvAddr(namesrv);
            producer.setInstanceName("interop-acl-" + seq + "-" + System.nanoTime());
            producer.setVipChannelEnabled(false);
            producer.setRetryTimesWhenSendFailed(0);
            producer.start();
            try {
                byte[] data = ("acl-" + seq).getBytes("UTF-8");
                printResult(seq, producer.send(new Message(cases[seq][1], data)));
            } catch (Exception e) {
                Throwable cause = e;
                while (cause != null && !(cause instanceof MQBrokerException)) {
                    cause = cause.getCause();
                }
                if (cause == null) {
                    printError(seq, e);
                } else {
                    MQBrokerException refused = (MQBrokerException) cause;
                    System.out.println("REFUSED " + seq + " " + refused.getResponseCode() + " "
                        + String.valueOf(refused.getErrorMessage()).replace('\n', ' '));
                }
            } finally {
                producer.shutdown();
            }
        }
        consume(namesrv, topic, group, 1, 30000,
            new AclClientRPCHook(new SessionCredentials(accessKey, secretKey)));
    }

    static void consume(String namesrv, String topic, String group, int expected, long timeoutMs)
        throws Exception {
        consume(namesrv, topic, group, expected, timeoutMs, null);
    }

    static void consume(String namesrv, String topic, String group, int expected, long timeoutMs,
        RPCHook hook) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group, hook);
        consumer.setNamesrvAddr(namesrv);
        consumer.setAutoCommit(false);
        // The pulls assign() starts begin at 0 too, so one racing the seek below cannot move a
        // queue past its first message (CI once missed one message with the default, the last
        // offset, in a 5.4.0 run).
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.start();
        int count = 0;
        Set<String> seen = new HashSet<>();
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
                seekToStart(consumer, mq, deadline);
            }
            while (count < expected && System.currentTimeMillis() < deadline) {
                for (MessageExt m : consumer.poll(1000)) {
                    // seek() right after assign() can race the pull already under way: a
                    // message may come twice. Print each (queue, offset) once.
                    if (!seen.add(m.getQueueId() + ":" + m.getQueueOffset())) {
                        continue;
                    }
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

    /**
     * Seeks {@code mq} to offset 0, retrying until {@code deadline}: the seek asks the broker
     * for the queue's min offset on a connection the pull threads open at the same moment, and
     * once in CI (5.4.0 client, 5.4.0 broker) that first write failed with "send request
     * failed". A user's program retries such an admin call; each failure is printed on stderr.
     */
    static void seekToStart(DefaultLitePullConsumer consumer, MessageQueue mq, long deadline)
        throws Exception {
        while (true) {
            try {
                consumer.seek(mq, 0);
                return;
            } catch (MQClientException e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
                System.err.println("RETRY seek " + mq + ": " + e);
                Thread.sleep(200);
            }
        }
    }

    /**
     * A {@code DefaultMQPushConsumer} of {@code group} on {@code topic} that fails every
     * message it is given ({@code RECONSUME_LATER}) with {@code maxReconsumeTimes}, printing
     * {@code CALL <epoch ms> <body> <reconsumeTimes> <topic>} for each, until {@code calls}
     * calls; its shutdown waits for the last send-back.
     */
    static void reconsume(String namesrv, String topic, String group, int maxReconsumeTimes,
        int calls, long timeoutMs) throws Exception {
        CountDownLatch enough = new CountDownLatch(calls);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("interop-reconsume-" + System.nanoTime());
        consumer.setPollNameServerInterval(ROUTE_POLL_MS);
        consumer.setHeartbeatBrokerInterval(HEARTBEAT_MS);
        consumer.setMaxReconsumeTimes(maxReconsumeTimes);
        consumer.setAwaitTerminationMillisWhenShutdown(30000);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                synchronized (System.out) {
                    System.out.println("CALL " + System.currentTimeMillis() + " "
                        + new String(m.getBody()) + " " + m.getReconsumeTimes() + " "
                        + m.getTopic());
                    System.out.flush();
                }
                enough.countDown();
            }
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        consumer.start();
        try {
            enough.await(timeoutMs, TimeUnit.MILLISECONDS);
        } finally {
            consumer.shutdown();
        }
        System.out.println("DONE " + (calls - enough.getCount()));
        System.out.flush();
    }

    /** RocketMQ's default allocation, reporting the member count of every rebalance. */
    static final class Reporting implements AllocateMessageQueueStrategy {
        private final AllocateMessageQueueAveragely inner = new AllocateMessageQueueAveragely();

        @Override
        public List<MessageQueue> allocate(String group, String cid, List<MessageQueue> all,
            List<String> cids) {
            List<MessageQueue> mine = inner.allocate(group, cid, all, cids);
            synchronized (Peer.class) {
                System.out.println("MEMBERS " + cids.size());
                System.out.flush();
            }
            return mine;
        }

        @Override
        public String getName() {
            return inner.getName();
        }
    }

    /** Prints each message, counting down {@code enough} at the {@code atLeast}th; false when
     * printing failed (the listener then asks for the messages again). */
    static boolean printAll(List<MessageExt> msgs, AtomicInteger count, int atLeast,
        CountDownLatch enough) {
        try {
            for (MessageExt m : msgs) {
                printGot(m);
                if (count.incrementAndGet() == atLeast) {
                    enough.countDown();
                }
            }
            return true;
        } catch (Exception e) {
            return false;
        }
    }

    static synchronized void printGot(MessageExt m) throws Exception {
        System.out.println("GOT " + m.getQueueId() + " " + m.getQueueOffset() + " "
            + new String(m.getBody(), "UTF-8"));
        System.out.flush();
    }

    /**
     * A member of consumer group GROUP subscribed to every tag of TOPIC, as applications use
     * it: a {@code DefaultLitePullConsumer} (subscribe, commitSync after each poll) or a
     * {@code DefaultMQPushConsumer} (clustering, CONSUME_SUCCESS). It starts at the group's
     * committed offsets (a new group: wherever the broker says), prints every message it is
     * given, and shuts down, committing, once it has AT_LEAST of them (or at TIMEOUT_MS); with
     * AT_LEAST 0, once its standard input closes (the test stops a group's members together).
     */
    static void group(String namesrv, String topic, String group, String kind, int atLeast,
        long timeoutMs, MessageSelector selector) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        AtomicInteger count = new AtomicInteger();
        String instance = "interop-group-" + System.nanoTime();
        CountDownLatch enough = new CountDownLatch(1);
        if (atLeast == 0) {
            Thread stdin = new Thread(() -> {
                try {
                    while (System.in.read() >= 0) {
                        continue;
                    }
                } catch (java.io.IOException e) {
                    // A closed input is the signal either way.
                }
                enough.countDown();
            });
            stdin.setDaemon(true);
            stdin.start();
        }
        if (kind.equals("lite")) {
            DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
            consumer.setNamesrvAddr(namesrv);
            consumer.setInstanceName(instance);
            consumer.setPollNameServerInterval(ROUTE_POLL_MS);
            consumer.setHeartbeatBrokerInterval(HEARTBEAT_MS);
            consumer.setAutoCommit(false);
            consumer.setAllocateMessageQueueStrategy(new Reporting());
            consumer.subscribe(topic, selector);
            consumer.start();
            try {
                while (enough.getCount() > 0 && System.currentTimeMillis() < deadline) {
                    List<MessageExt> got = consumer.poll(1000);
                    for (MessageExt m : got) {
                        printGot(m);
                        if (count.incrementAndGet() == atLeast) {
                            enough.countDown();
                        }
                    }
                    if (!got.isEmpty()) {
                        consumer.commitSync();
                    }
                }
            } finally {
                consumer.shutdown();
            }
        } else {
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
            consumer.setNamesrvAddr(namesrv);
            consumer.setInstanceName(instance);
            consumer.setPollNameServerInterval(ROUTE_POLL_MS);
            consumer.setHeartbeatBrokerInterval(HEARTBEAT_MS);
            consumer.subscribe(topic, selector);
            consumer.setAllocateMessageQueueStrategy(new Reporting());
            // Messages handed to the listener finish (and commit) before shutdown persists.
            consumer.setAwaitTerminationMillisWhenShutdown(30000);
            if (kind.equals("orderly")) {
                // MessageListenerOrderly: the queues this member holds locked on their
                // master (LOCK_BATCH_MQ), one listener call at a time per queue, in order.
                consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) ->
                    printAll(msgs, count, atLeast, enough)
                        ? ConsumeOrderlyStatus.SUCCESS
                        : ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT);
            } else {
                consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) ->
                    printAll(msgs, count, atLeast, enough)
                        ? ConsumeConcurrentlyStatus.CONSUME_SUCCESS
                        : ConsumeConcurrentlyStatus.RECONSUME_LATER);
            }
            consumer.start();
            try {
                enough.await(Math.max(1, deadline - System.currentTimeMillis()),
                    TimeUnit.MILLISECONDS);
            } finally {
                consumer.shutdown();
            }
        }
        System.out.println("DONE " + count.get());
        System.out.flush();
    }
}
