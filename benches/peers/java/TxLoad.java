import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The load generator of {@code rocketha bench transaction} (benches/peers/rocketmq.py compiles
 * it beside Peer.java against the pinned RocketMQ client):
 *
 * <pre>
 * TxLoad NAMESRV BROKER TOPIC CONNECTIONS SECONDS SIZE WARMUP_SECONDS tx|plain
 * </pre>
 *
 * Load.java's loop (Counts.measure) on CONNECTIONS threads, each with a
 * {@code TransactionMQProducer} of its own (a distinct instanceName, so a connection of its
 * own) whose local transaction commits at once. {@code tx}: every send is
 * {@code sendMessageInTransaction} (the half message sent synchronously, the local
 * transaction, then END_TRANSACTION, which the client sends oneway); {@code plain}: a plain
 * synchronous {@code send} of the same producers, the baseline. A send counts as SEND_OK as
 * Load's do (a transactional one also needs COMMIT_MESSAGE from its local transaction).
 * TOPIC is first created on BROKER (host:port; "-" for none), and each producer's first send,
 * before the clock starts, is repeated until SEND_OK for up to 60 s (a refusal with
 * NO_PERMISSION, code 16, fails the run at once). Prints Counts' JSON line
 * with {@code total_ok} added: the SEND_OK sends of the whole run, warm-up and first sends
 * included (what the topic holds once every commit landed).
 */
public final class TxLoad {
    /** ResponseCode.NO_PERMISSION. */
    static final int NO_PERMISSION = 16;

    private TxLoad() {
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Exception e) {
            // The producers' threads would keep the JVM alive: exit, saying why.
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    static void run(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[2];
        int connections = Integer.parseInt(args[3]);
        double seconds = Double.parseDouble(args[4]);
        int size = Integer.parseInt(args[5]);
        double warmup = Double.parseDouble(args[6]);
        boolean transactional = args[7].equals("tx");
        Peer.prepareTopic(namesrv, args[1], topic);
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'x');
        AtomicLong totalOk = new AtomicLong();

        TransactionMQProducer[] producers = new TransactionMQProducer[connections];
        for (int i = 0; i < connections; i++) {
            TransactionMQProducer p = new TransactionMQProducer("bench-txload");
            p.setNamesrvAddr(namesrv);
            p.setInstanceName("txload-" + i + "-" + System.nanoTime());
            p.setVipChannelEnabled(false);
            p.setSendMsgTimeout(10000);
            p.setRetryTimesWhenSendFailed(0);
            p.setRetryAnotherBrokerWhenNotStoreOK(false);
            p.setCompressMsgBodyOverHowmuch(1 << 30);
            p.setTransactionListener(new TransactionListener() {
                @Override
                public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                    return LocalTransactionState.COMMIT_MESSAGE;
                }

                @Override
                public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                    return LocalTransactionState.COMMIT_MESSAGE;
                }
            });
            p.start();
            producers[i] = p;
            long deadline = System.currentTimeMillis() + 60000;
            while (true) {
                try {
                    if (send(p, topic, body, transactional).equals("SEND_OK")) {
                        totalOk.incrementAndGet();
                        break;
                    }
                } catch (Exception e) {
                    // NO_PERMISSION (a broker that takes no transactional messages) is the
                    // broker's answer: no point asking again for a minute.
                    MQBrokerException refused = refusal(e);
                    if (refused != null && refused.getResponseCode() == NO_PERMISSION
                        || System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("no SEND_OK in 60 s");
                }
                Thread.sleep(50);
            }
        }

        String line = Counts.measure(connections, warmup, seconds, i -> {
            String status = send(producers[i], topic, body, transactional);
            if (status.equals("SEND_OK")) {
                totalOk.incrementAndGet();
            }
            return status;
        });
        // Counts' line ends with '}': total_ok goes in before it.
        System.out.println(line.substring(0, line.length() - 1) + ", \"total_ok\": "
            + totalOk.get() + "}");
        System.out.flush();
        for (TransactionMQProducer p : producers) {
            p.shutdown();
        }
    }

    /** The broker's answer that {@code e} was, if it was one. */
    static MQBrokerException refusal(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof MQBrokerException) {
                return (MQBrokerException) c;
            }
        }
        return null;
    }

    /** One send: SEND_OK when stored (and, transactional, committed by its local
     * transaction), else the send status or the local transaction's state. */
    static String send(TransactionMQProducer p, String topic, byte[] body, boolean transactional)
        throws Exception {
        Message msg = new Message(topic, body);
        if (!transactional) {
            return p.send(msg).getSendStatus().name();
        }
        var r = p.sendMessageInTransaction(msg, null);
        if (r.getSendStatus() != SendStatus.SEND_OK) {
            return r.getSendStatus().name();
        }
        return r.getLocalTransactionState() == LocalTransactionState.COMMIT_MESSAGE
            ? "SEND_OK" : r.getLocalTransactionState().name();
    }
}
