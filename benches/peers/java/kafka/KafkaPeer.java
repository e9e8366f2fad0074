import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Kafka side of {@code rocketha bench peers} (benches/peers/kafka.py compiles it against
 * the pinned Kafka jars):
 *
 * <pre>
 * KafkaPeer ready BOOTSTRAP BROKERS TOPIC PARTITIONS REPLICAS MIN_ISR TIMEOUT_SECONDS
 * KafkaPeer load BOOTSTRAP TOPIC CONNECTIONS SECONDS SIZE WARMUP_SECONDS ACKS
 * KafkaPeer catchup BOOTSTRAP TOPIC BYTES SIZE TIMEOUT_SECONDS
 * KafkaPeer drain BOOTSTRAP TOPIC RECORDS RACK TIMEOUT_SECONDS
 * </pre>
 *
 * {@code ready} waits (polling the cluster's metadata, no fixed sleeps) until BROKERS brokers
 * are registered, creates TOPIC with REPLICAS replicas and min.insync.replicas MIN_ISR, and
 * waits until every partition has a leader and a full ISR; prints READY.
 *
 * {@code load} is Load.java's synchronous sender on the Kafka producer: CONNECTIONS threads,
 * each with a {@code KafkaProducer} of its own (so its own connection to the leader), ACKS
 * (all: every in-sync replica has the record; 1: the leader only, ASYNC_MASTER's analogue),
 * max.in.flight.requests.per.connection=1, linger.ms=0, each sending SIZE-byte records with
 * {@code send(record).get()}, one after the other: one record in flight per connection, as a
 * synchronous RocketMQ producer has one message in flight per connection. The same warm-up,
 * counting and JSON line as Load.java (statuses: SEND_OK or the exception's class name).
 *
 * {@code catchup} measures a follower catching up, as an empty RocketMQ slave does: TOPIC (one
 * partition) is created on broker 1 alone, filled with BYTES of SIZE-byte records (a pipelined
 * producer, acks=1), then broker 2 is added as a replica (a partition reassignment) and the
 * time until it is in the ISR, polled every 5 ms, is the catch-up. Prints
 * {@code {"bytes", "records", "seconds"}}: the leader's log size, the records sent and that
 * time.
 *
 * {@code drain} is kafka-consumer-perf-test's loop on one consumer with the consumer's
 * defaults: partition 0 of TOPIC assigned, read from its beginning until RECORDS records.
 * {@code client.rack} RACK makes the leader name the replica in that rack as the consumer's
 * preferred read replica (KIP-392, the brokers' {@code RackAwareReplicaSelector}), so a RACK
 * of a follower reads from the follower, as a RocketMQ consumer reads from a slave. Prints
 * {@code {"messages", "bytes", "seconds", "node_bytes"}}: the clock starts when the first
 * poll returns records (no start-up or metadata round trip counted), bytes are the values
 * returned after that, node_bytes what the consumer received from each broker.
 */
public final class KafkaPeer {
    private KafkaPeer() {
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "ready":
                ready(args[1], Integer.parseInt(args[2]), args[3], Integer.parseInt(args[4]),
                    Short.parseShort(args[5]), args[6], Double.parseDouble(args[7]));
                break;
            case "load":
                load(args[1], args[2], Integer.parseInt(args[3]), Double.parseDouble(args[4]),
                    Integer.parseInt(args[5]), Double.parseDouble(args[6]), args[7]);
                break;
            case "catchup":
                catchup(args[1], args[2], Long.parseLong(args[3]), Integer.parseInt(args[4]),
                    Double.parseDouble(args[5]));
                break;
            case "drain":
                drain(args[1], args[2], Long.parseLong(args[3]), args[4],
                    Double.parseDouble(args[5]));
                break;
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
        System.exit(0);
    }

    static void ready(String bootstrap, int brokers, String topic, int partitions, short replicas,
                      String minIsr, double timeout) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        long deadline = System.nanoTime() + (long) (timeout * 1e9);
        try (Admin admin = Admin.create(props)) {
            while (admin.describeCluster().nodes().get().size() < brokers) {
                check(deadline, "fewer than " + brokers + " brokers registered");
                Thread.sleep(50);
            }
            NewTopic t = new NewTopic(topic, partitions, replicas)
                .configs(Map.of("min.insync.replicas", minIsr));
            try {
                admin.createTopics(List.of(t)).all().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
            while (true) {
                boolean full = false;
                try {
                    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
                        .get().get(topic);
                    full = d.partitions().size() == partitions;
                    for (TopicPartitionInfo p : d.partitions()) {
                        full &= p.leader() != null && p.isr().size() == replicas;
                    }
                } catch (ExecutionException e) {
                    // The topic's metadata reaches every broker a moment after the create.
                }
                if (full) {
                    break;
                }
                check(deadline, "topic " + topic + " has no full ISR");
                Thread.sleep(50);
            }
        }
        System.out.println("READY");
    }

    static void catchup(String bootstrap, String topic, long bytes, int size, double timeout)
            throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        long deadline = System.nanoTime() + (long) (timeout * 1e9);
        try (Admin admin = Admin.create(props)) {
            NewTopic t = new NewTopic(topic, Map.of(0, List.of(1)));
            admin.createTopics(List.of(t)).all().get();
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.ACKS_CONFIG, "1");
            p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
            p.put(ProducerConfig.BATCH_SIZE_CONFIG, Integer.toString(256 * 1024));
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
            byte[] body = new byte[size];
            Arrays.fill(body, (byte) 'x');
            long records = 0;
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                for (; records * size < bytes; records++) {
                    producer.send(new ProducerRecord<>(topic, 0, null, body));
                }
                producer.flush();
            }
            TopicPartition tp = new TopicPartition(topic, 0);
            long logBytes = admin.describeLogDirs(List.of(1)).allDescriptions().get().get(1)
                .values().stream().mapToLong(d -> {
                    ReplicaInfo r = d.replicaInfos().get(tp);
                    return r == null ? 0 : r.size();
                }).sum();
            long started = System.nanoTime();
            admin.alterPartitionReassignments(
                Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(1, 2))))).all().get();
            while (true) {
                TopicPartitionInfo info = admin.describeTopics(List.of(topic)).allTopicNames()
                    .get().get(topic).partitions().get(0);
                if (info.isr().size() == 2) {
                    break;
                }
                check(deadline, "broker 2 did not join the ISR of " + topic);
                Thread.sleep(5);
            }
            double took = (System.nanoTime() - started) / 1e9;
            System.out.println("{\"bytes\": " + logBytes + ", \"records\": " + records
                + ", \"seconds\": " + took + "}");
        }
    }

    static void drain(String bootstrap, String topic, long records, String rack, double timeout)
            throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_RACK_CONFIG, rack);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        long deadline = System.nanoTime() + (long) (timeout * 1e9);
        long got = 0;
        long bytes = 0;
        long first = 0;
        long last = 0;
        Map<String, Object> nodeBytes = new TreeMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            while (got < records) {
                check(deadline, "drained " + got + " of " + records + " records");
                boolean timed = first != 0;
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofSeconds(1))) {
                    got++;
                    if (timed) {
                        bytes += r.serializedValueSize();
                    }
                }
                last = System.nanoTime();
                if (!timed && got > 0) {
                    first = last;
                }
            }
            consumer.metrics().forEach((name, metric) -> {
                if (name.group().equals("consumer-node-metrics")
                        && name.name().equals("incoming-byte-total")) {
                    nodeBytes.put(name.tags().get("node-id"), metric.metricValue());
                }
            });
        }
        StringBuilder nodes = new StringBuilder();
        nodeBytes.forEach((node, value) -> nodes.append(nodes.length() == 0 ? "" : ", ")
            .append('"').append(node).append("\": ").append(value));
        System.out.println("{\"messages\": " + got + ", \"bytes\": " + bytes + ", \"seconds\": "
            + (last - first) / 1e9 + ", \"node_bytes\": {" + nodes + "}}");
    }

    static void check(long deadline, String what) {
        if (System.nanoTime() > deadline) {
            throw new IllegalStateException(what);
        }
    }

    static void load(String bootstrap, String topic, int connections, double seconds, int size,
                     double warmup, String acks) throws Exception {
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'x');
        List<KafkaProducer<byte[], byte[]>> producers = new ArrayList<>();
        for (int i = 0; i < connections; i++) {
            Properties props = new Properties();
            props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ProducerConfig.CLIENT_ID_CONFIG, "load-" + i);
            props.put(ProducerConfig.ACKS_CONFIG, acks);
            props.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
            props.put(ProducerConfig.LINGER_MS_CONFIG, "0");
            props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
            props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "10000");
            props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
            props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
            KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props);
            // The first send fetches the metadata and opens the connection, before the clock.
            p.send(new ProducerRecord<>(topic, body)).get();
            producers.add(p);
        }

        System.out.println(Counts.measure(connections, warmup, seconds, i -> {
            try {
                producers.get(i).send(new ProducerRecord<>(topic, body)).get();
                return "SEND_OK";
            } catch (ExecutionException e) {
                return e.getCause().getClass().getSimpleName();
            }
        }));
        System.out.flush();
        for (KafkaProducer<byte[], byte[]> p : producers) {
            p.close();
        }
    }
}
