import java.lang.management.ManagementFactory;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The load generators' sending loop (Load.java on the RocketMQ client, kafka/KafkaPeer.java on
 * the Kafka producer), each thread's counts and latencies (micros), and the JSON line both
 * print, so the two measure and report alike: {@code {"sent", "ok", "statuses", "p50_us",
 * "p99_us", "p999_us", "seconds", "cpu_s"}}, where cpu_s is the CPU time this JVM (the client)
 * used while it counted: what a client that may be the bound costs. No dependency beyond the
 * JDK: both peers' builds compile it.
 */
final class Counts {
    /** One synchronous send by sending thread {@code thread}: its status, SEND_OK if acked. */
    interface Send {
        String send(int thread) throws Exception;
    }

    long[] micros = new long[1 << 14];
    int n;
    long ok;
    final Map<String, Long> statuses = new TreeMap<>();

    void add(long us, String status) {
        if (n == micros.length) {
            micros = Arrays.copyOf(micros, n * 2);
        }
        micros[n++] = us;
        statuses.merge(status, 1L, Long::sum);
    }

    /**
     * {@code threads} threads each calling {@code send} one send after the other (an exception
     * counts as its class's simple name), counted after {@code warmup} seconds for
     * {@code seconds}; the JSON line.
     */
    static String measure(int threads, double warmup, double seconds, Send send)
            throws InterruptedException {
        Counts[] counts = new Counts[threads];
        AtomicBoolean measuring = new AtomicBoolean(false);
        AtomicBoolean stop = new AtomicBoolean(false);
        CountDownLatch done = new CountDownLatch(threads);
        for (int i = 0; i < threads; i++) {
            final int thread = i;
            final Counts c = new Counts();
            counts[i] = c;
            new Thread(() -> {
                try {
                    while (!stop.get()) {
                        long t0 = System.nanoTime();
                        String status;
                        try {
                            status = send.send(thread);
                        } catch (Exception e) {
                            status = e.getClass().getSimpleName();
                        }
                        long us = (System.nanoTime() - t0) / 1000;
                        if (measuring.get() && !stop.get()) {
                            c.add(us, status);
                            if (status.equals("SEND_OK")) {
                                c.ok++;
                            }
                        }
                    }
                } finally {
                    done.countDown();
                }
            }, "load-" + i).start();
        }
        Thread.sleep((long) (warmup * 1000));
        measuring.set(true);
        long started = System.nanoTime();
        long cpu0 = processCpuNanos();
        Thread.sleep((long) (seconds * 1000));
        stop.set(true);
        double took = (System.nanoTime() - started) / 1e9;
        double cpu = (processCpuNanos() - cpu0) / 1e9;
        done.await();
        return report(counts, took, cpu);
    }

    /** This JVM's CPU time so far (every thread, user and system), in nanoseconds. */
    static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean)
            ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    /**
     * Every thread's counts merged, over {@code took} seconds in which the JVM used {@code cpu}
     * CPU seconds, as one JSON line.
     */
    static String report(Counts[] counts, double took, double cpu) {
        long sent = 0;
        long ok = 0;
        Map<String, Long> statuses = new TreeMap<>();
        for (Counts c : counts) {
            sent += c.n;
            ok += c.ok;
            c.statuses.forEach((k, v) -> statuses.merge(k, v, Long::sum));
        }
        long[] all = new long[(int) sent];
        int at = 0;
        for (Counts c : counts) {
            System.arraycopy(c.micros, 0, all, at, c.n);
            at += c.n;
        }
        Arrays.sort(all);
        StringBuilder out = new StringBuilder();
        out.append("{\"sent\": ").append(sent).append(", \"ok\": ").append(ok);
        out.append(", \"statuses\": {");
        boolean first = true;
        for (Map.Entry<String, Long> e : statuses.entrySet()) {
            out.append(first ? "" : ", ").append('"').append(e.getKey()).append("\": ")
                .append(e.getValue());
            first = false;
        }
        out.append("}, \"p50_us\": ").append(quantile(all, 0.5));
        out.append(", \"p99_us\": ").append(quantile(all, 0.99));
        out.append(", \"p999_us\": ").append(quantile(all, 0.999));
        out.append(", \"seconds\": ").append(took);
        out.append(", \"cpu_s\": ").append(cpu).append('}');
        return out.toString();
    }

    static long quantile(long[] sorted, double q) {
        if (sorted.length == 0) {
            return -1;
        }
        return sorted[Math.min(sorted.length - 1, (int) (q * sorted.length))];
    }
}
