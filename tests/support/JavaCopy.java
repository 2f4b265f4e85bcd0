import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Writes records given on stdin with Kafka's own Java producer, for tests whose verdict must not
 * come from kmirror's writer: one line per record, tab-separated: partition, key, value,
 * timestamp, headers; bytes in hex, '-' for null, headers as name:value pairs (both hex) joined
 * by commas, '' for none. Args: bootstrap, topic, and optionally the producer's compression.type.
 */
public class JavaCopy {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        props.put("enable.idempotence", "true");
        if (args.length > 2) {
            props.put("compression.type", args[2]);
        }
        HexFormat hex = HexFormat.of();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] f = line.split("\t", -1);
                List<Header> headers = new ArrayList<>();
                if (!f[4].isEmpty()) {
                    for (String pair : f[4].split(",")) {
                        String[] nv = pair.split(":", -1);
                        headers.add(new RecordHeader(new String(hex.parseHex(nv[0]), StandardCharsets.UTF_8),
                                                     nv[1].equals("-") ? null : hex.parseHex(nv[1])));
                    }
                }
                producer.send(new ProducerRecord<>(args[1], Integer.parseInt(f[0]), Long.parseLong(f[3]),
                        f[1].equals("-") ? null : hex.parseHex(f[1]), f[2].equals("-") ? null : hex.parseHex(f[2]),
                        headers));
            }
            producer.flush();
        }
    }
}
