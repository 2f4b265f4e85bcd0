import java.io.BufferedWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * {@code kmirror bench latency --java-clients}: Java's own clients in the two roles
 * mirror/bench/steady.py gives librdkafka, since Java clients are what most users run.
 * Run from source by {@code java -cp <kafka libs>/* LatencyClients.java} (no build step).
 *
 * <ul>
 * <li>{@code produce BOOTSTRAP TOPIC RATE CODEC SECONDS VALUES FROM_MS UNTIL_MS COUNT ACKS [COMMIT_MS]}:
 * RATE records a second for SECONDS, values taken in turn from the file VALUES (one a line),
 * with Java's producer defaults but the codec (batch.size 16384, linger.ms 5, acks all,
 * idempotence); writes to COUNT how many records the source acknowledged, and to ACKS, one a
 * line, the latency at the source (acknowledgement minus CreateTime, ms) of those created in
 * [FROM_MS, UNTIL_MS), as steady.produce_steadily does. With COMMIT_MS (above 0) the producer is
 * transactional and commits that often: Kafka's own floor for exactly-once.</li>
 * <li>{@code read BOOTSTRAP TOPIC PARTITIONS FROM_MS UNTIL_MS EXPECTED TIMEOUT_S OUT EXPECTED_FILE}:
 * a read_committed consumer of every partition from the start; writes one latency (arrival
 * minus CreateTime, ms) a line for the records created in [FROM_MS, UNTIL_MS), then
 * {@code # seen N}, as steady.measure_latency does; stops after EXPECTED records, or the
 * number EXPECTED_FILE holds once it exists, or TIMEOUT_S.</li>
 * </ul>
 */
public final class LatencyClients {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]), args[4],
                    Double.parseDouble(args[5]), Path.of(args[6]), Long.parseLong(args[7]), Long.parseLong(args[8]),
                    Path.of(args[9]), Path.of(args[10]), args.length > 11 ? Long.parseLong(args[11]) : 0);
            case "read" -> read(args[1], args[2], Integer.parseInt(args[3]), Long.parseLong(args[4]),
                    Long.parseLong(args[5]), Long.parseLong(args[6]), Double.parseDouble(args[7]), Path.of(args[8]),
                    Path.of(args[9]));
            default -> throw new IllegalArgumentException("produce or read, not " + args[0]);
        }
    }

    private static double nowMs() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1000.0 + now.getNano() / 1e6;
    }

    static void produce(String bootstrap, String topic, int rate, String codec, double seconds, Path valuesFile,
                        long fromMs, long untilMs, Path countFile, Path acksFile, long commitMs) throws Exception {
        List<byte[]> values = new ArrayList<>();
        for (String line : Files.readAllLines(valuesFile, StandardCharsets.US_ASCII)) {
            values.add(line.getBytes(StandardCharsets.US_ASCII));
        }
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("compression.type", codec);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        if (commitMs > 0) {
            props.put("transactional.id", "latency-floor-" + ProcessHandle.current().pid());
        }
        AtomicLong delivered = new AtomicLong();
        List<Double> latencies = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            if (commitMs > 0) {
                producer.initTransactions();
                producer.beginTransaction();
            }
            long committedAt = System.nanoTime();
            long began = System.nanoTime();
            long end = began + (long) (seconds * 1e9);
            long sent = 0;
            while (true) {
                long now = System.nanoTime();
                if (now >= end) {
                    break;
                }
                long due = (long) ((now - began) / 1e9 * rate);
                for (; sent < due; sent++) {
                    byte[] value = values.get((int) (sent % values.size()));
                    producer.send(new ProducerRecord<>(topic, value), (metadata, error) -> {
                        if (error == null) {
                            delivered.incrementAndGet();
                            long created = metadata.timestamp();
                            if (fromMs <= created && created < untilMs) {
                                synchronized (latencies) {
                                    latencies.add(nowMs() - created);
                                }
                            }
                        }
                    });
                }
                if (commitMs > 0 && System.nanoTime() - committedAt >= commitMs * 1_000_000L) {
                    producer.commitTransaction();  // flushes; records wait for it as a mirror's do
                    producer.beginTransaction();
                    committedAt = System.nanoTime();
                }
                Thread.sleep(1);
            }
            if (commitMs > 0) {
                producer.commitTransaction();
            }
            producer.flush();
        }
        Files.writeString(countFile, delivered.get() + "\n");
        try (BufferedWriter out = Files.newBufferedWriter(acksFile)) {
            synchronized (latencies) {
                for (double latency : latencies) {
                    out.write(String.format(Locale.ROOT, "%.2f%n", latency));
                }
            }
        }
    }

    static void read(String bootstrap, String topic, int partitions, long fromMs, long untilMs, long expected,
                     double timeoutS, Path out, Path expectedFile) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("isolation.level", "read_committed");
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.put("fetch.max.wait.ms", "10");  // as steady.measure_latency's fetch.wait.max.ms
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long seen = 0;
        long deadline = System.nanoTime() + (long) (timeoutS * 1e9);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
             BufferedWriter writer = Files.newBufferedWriter(out)) {
            List<TopicPartition> assigned = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                assigned.add(new TopicPartition(topic, p));
            }
            consumer.assign(assigned);
            consumer.seekToBeginning(assigned);
            long looked = System.nanoTime();
            while (seen < expected && System.nanoTime() < deadline) {
                if (System.nanoTime() - looked > 500_000_000L) {
                    looked = System.nanoTime();
                    try {
                        expected = Long.parseLong(Files.readString(expectedFile).trim());
                    } catch (java.io.IOException | NumberFormatException notYet) {
                        // the load is still running
                    }
                }
                var records = consumer.poll(Duration.ofMillis(100));
                double now = nowMs();
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    seen++;
                    long created = record.timestamp();
                    if (fromMs <= created && created < untilMs) {
                        writer.write(String.format(Locale.ROOT, "%.2f%n", now - created));
                    }
                }
            }
            writer.write("# seen " + seen + "\n");
        }
    }
}
