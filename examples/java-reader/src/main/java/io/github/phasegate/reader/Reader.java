package io.github.phasegate.reader;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads phasegate's aligned output as docs/CONSUMING.md says, with Kafka's own consumer.
 *
 * <p>Per partition it buffers data records until the marker of their phase, checks the marker's
 * count against what it buffered, prints one line for the phase, and only then commits the offset
 * after the marker. A partition taken away by a rebalance loses its buffer: the next owner reads
 * the half phase again from the last committed boundary.
 *
 * <pre>
 * java -cp 'target/classes:target/lib/*' io.github.phasegate.reader.Reader \
 *     --brokers localhost:9092 --topic aligned --group java-reader [--idle 5]
 * phase=42 partition=0 records=17 sources=orders:12,payments:5 marker_count=17 sealed_by=watermark
 * </pre>
 *
 * <p>Exit status 0 when every phase checked out, 3 after a violation, 1 on an error.
 */
public final class Reader {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** The buffered data of the open phase of one output partition. */
  private static final class Open {
    Long phase;
    long records;
    final Map<String, Long> sources = new TreeMap<>();
  }

  private final Map<Integer, Open> open = new HashMap<>();
  private int violations;

  public static void main(String[] args) {
    Map<String, String> opt = new HashMap<>(Map.of(
        "--brokers", "localhost:9092", "--topic", "aligned", "--group", "phasegate-java-reader", "--idle", "0"));
    for (int i = 0; i + 1 < args.length; i += 2) {
      opt.put(args[i], args[i + 1]);
    }
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, opt.get("--brokers"));
    p.put(ConsumerConfig.GROUP_ID_CONFIG, opt.get("--group"));
    // Java's default is read_uncommitted: aborted phases would be read as data.
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false"); // commit phase boundaries only
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    long idleMs = (long) (Double.parseDouble(opt.get("--idle")) * 1000);
    Reader reader = new Reader();
    AtomicBoolean stop = new AtomicBoolean();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
      Thread main = Thread.currentThread();
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        stop.set(true);
        consumer.wakeup();
        try {
          main.join(10_000);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }));
      consumer.subscribe(List.of(opt.get("--topic")), new ConsumerRebalanceListener() {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
          // Half-read phases are dropped: the next owner starts at the last committed
          // offset, which is always just after a marker.
          parts.forEach(tp -> reader.open.remove(tp.partition()));
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> parts) {
          onPartitionsRevoked(parts);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> parts) {}
      });
      long last = System.currentTimeMillis();
      while (!stop.get()) {
        ConsumerRecords<byte[], byte[]> recs;
        try {
          recs = consumer.poll(Duration.ofMillis(200));
        } catch (WakeupException e) {
          break;
        }
        if (recs.isEmpty()) {
          if (idleMs > 0 && System.currentTimeMillis() - last > idleMs) {
            break;
          }
          continue;
        }
        last = System.currentTimeMillis();
        for (ConsumerRecord<byte[], byte[]> r : recs) {
          reader.feed(consumer, r);
        }
      }
    } catch (Exception e) {
      System.err.println("java-reader: " + e);
      System.exit(1);
    }
    if (!stop.get()) { // after a signal the JVM is already exiting; System.exit would block
      System.exit(reader.violations > 0 ? 3 : 0);
    }
  }

  private static String header(ConsumerRecord<byte[], byte[]> r, String name) {
    Header h = r.headers().lastHeader(name);
    return h == null || h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }

  private void violation(int partition, String text) {
    violations++;
    System.out.println("VIOLATION partition=" + partition + ": " + text);
  }

  /** Takes one record; commits after a marker whose phase checked out. */
  void feed(KafkaConsumer<byte[], byte[]> consumer, ConsumerRecord<byte[], byte[]> r) throws Exception {
    int part = r.partition();
    Open st = open.computeIfAbsent(part, k -> new Open());
    String phaseHdr = header(r, "phasegate.phase");
    if (phaseHdr == null) {
      violation(part, "offset " + r.offset() + ": no phasegate.phase header");
      return;
    }
    long phase = Long.parseUnsignedLong(phaseHdr);
    if (!"1".equals(header(r, "phasegate.marker"))) {
      // A data record: buffered until its phase's marker.
      if (st.phase != null && st.phase != phase) {
        violation(part, "offset " + r.offset() + ": data of phase " + phase + " while phase " + st.phase + " is open");
        st = new Open();
        open.put(part, st);
      }
      st.phase = phase;
      String source = header(r, "phasegate.source");
      String topic = source == null ? "" : source.substring(0, source.lastIndexOf('/', source.lastIndexOf('/') - 1));
      st.sources.merge(topic, 1L, Long::sum);
      st.records++;
      return;
    }
    // A marker: null key, JSON value. Never hand it to the join as data.
    JsonNode m = JSON.readTree(r.value());
    if (r.key() != null || m.path("phase").asLong() != phase || m.path("partition").asInt() != part) {
      violation(part, "offset " + r.offset() + ": malformed marker");
    }
    if (st.phase != null && st.phase != phase) {
      violation(part, "offset " + r.offset() + ": marker of phase " + phase + " after data of phase " + st.phase);
      st = new Open();
    }
    long count = m.path("count").asLong(-1);
    if (count != st.records) {
      violation(part, "phase " + phase + ": marker count " + count + ", " + st.records + " records read");
    }
    String sources = st.sources.entrySet().stream().map(e -> e.getKey() + ":" + e.getValue())
        .collect(Collectors.joining(","));
    System.out.println("phase=" + Long.toUnsignedString(phase) + " partition=" + part + " records=" + st.records
        + " sources=" + sources + " marker_count=" + count + " sealed_by=" + m.path("sealed_by").asText());
    System.out.flush();
    open.put(part, new Open());
    consumer.commitSync(Map.of(new TopicPartition(r.topic(), part), new OffsetAndMetadata(r.offset() + 1)));
  }
}
