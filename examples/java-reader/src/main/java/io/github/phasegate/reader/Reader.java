package io.github.phasegate.reader;

import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads phasegate's aligned output as docs/CONSUMING.md says, with Kafka's own consumer.
 *
 * <p>Each assigned partition gets a {@link PhaseReader} (a port of the Go markers.Reader:
 * MARKERS.md sections 2 to 3.3 and section 6) that starts from the group's committed offset and its
 * metadata: with metadata it drops the phases handed over before; with no commit it starts at the
 * log's first offset; anywhere else without metadata it returns only the phases it can prove whole
 * and reports the others as skipped. After the phases a record completed are printed, the reader's
 * checkpoint (offset and metadata) is committed; nothing is committed while it has none. A
 * partition taken away by a rebalance loses its reader.
 *
 * <p>At an idle exit (--idle) every reader is ended, as the Go join does: a reader started without
 * metadata reports the phases it could never prove whole as skipped (MARKERS.md rule C4, at the end
 * of the input), and what no writer completed is a VIOLATION; nothing is committed then. A commit
 * refused for an error of the group session (a rebalance, the coordinator moved) is logged and tried
 * again after the next poll; the consumer rejoins by itself. SIGTERM stops the reader wherever it
 * blocks (poll, commitSync, committed, beginningOffsets): the JVM's status 143.
 *
 * <pre>
 * java -cp 'target/classes:target/lib/*' io.github.phasegate.reader.Reader \
 *     --brokers localhost:9092 --topic aligned --group java-reader [--idle 5]
 * java -cp 'target/classes:target/lib/*' io.github.phasegate.reader.Reader --vectors markers/testdata/reader-vectors.json
 *
 * phase=42 partition=0 records=17 sources=orders:12,payments:5 marker_count=17 sealed_by=watermark
 * skipped phase=41 partition=0 records=3
 * VIOLATION partition=0: what
 * </pre>
 *
 * <p>Exit status 0 when every phase checked out, 3 after a violation, 1 on an error, and 1 at once
 * at a marker of a newer version ("v" above 2).
 */
public final class Reader {
  private final KafkaConsumer<byte[], byte[]> consumer;
  private final String topic;
  private final PrintStream out;
  private final Map<Integer, PhaseReader> readers = new HashMap<>();
  private final Map<Integer, Phase.Checkpoint> committed = new HashMap<>(); // last committed or started from
  private final TreeSet<Integer> uncommitted = new TreeSet<>(); // a commit refused for the group session: tried after a poll
  private int violations;
  private long assignedAt; // when partitions were last assigned: --idle counts from here too

  /** A marker of a version this reader does not know: it must stop. */
  static final class NewerVersion extends Exception {
    NewerVersion(String msg) {
      super(msg);
    }
  }

  private Reader(KafkaConsumer<byte[], byte[]> consumer, String topic, PrintStream out) {
    this.consumer = consumer;
    this.topic = topic;
    this.out = out;
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> opt = new HashMap<>(Map.of(
        "--brokers", "localhost:9092", "--topic", "aligned", "--group", "phasegate-java-reader", "--idle", "0"));
    for (int i = 0; i + 1 < args.length; i += 2) {
      opt.put(args[i], args[i + 1]);
    }
    if (opt.containsKey("--vectors")) {
      System.exit(Vectors.runFile(opt.get("--vectors"), System.out).isEmpty() ? 0 : 1);
    }
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, opt.get("--brokers"));
    p.put(ConsumerConfig.GROUP_ID_CONFIG, opt.get("--group"));
    // Java's default is read_uncommitted: aborted phases would be read as data.
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false"); // commit checkpoints only
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    long idleMs = (long) (Double.parseDouble(opt.get("--idle")) * 1000);
    AtomicBoolean stop = new AtomicBoolean();
    AtomicBoolean exiting = new AtomicBoolean();
    int code;
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
      Reader reader = new Reader(consumer, opt.get("--topic"), System.out);
      Thread main = Thread.currentThread();
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        if (exiting.get()) {
          return; // main called System.exit itself
        }
        stop.set(true);
        consumer.wakeup();
        try {
          main.join(10_000);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }));
      consumer.subscribe(List.of(reader.topic), reader.listener());
      code = reader.run(stop, idleMs);
    } catch (NewerVersion e) {
      System.out.flush();
      System.err.println("java-reader: stopped at a marker of a newer version, upgrade the reader: " + e.getMessage());
      code = 1;
    } catch (WakeupException e) {
      // SIGTERM while a call blocked (the shutdown hook's wakeup): a shutdown, not an error. run
      // handles it; this catches one outside it.
      code = 0;
    } catch (Exception e) {
      System.err.println("java-reader: " + e);
      code = 1;
    }
    if (!stop.get()) { // after a signal the JVM is already exiting
      exiting.set(true);
      System.exit(code);
    }
  }

  private ConsumerRebalanceListener listener() {
    return new ConsumerRebalanceListener() {
      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> parts) {
        assigned(parts);
      }

      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> parts) {
        // What a reader keeps belongs to phases the next owner reads whole from the last checkpoint.
        parts.forEach(tp -> {
          readers.remove(tp.partition());
          committed.remove(tp.partition());
          uncommitted.remove(tp.partition());
        });
      }

      @Override
      public void onPartitionsLost(Collection<TopicPartition> parts) {
        onPartitionsRevoked(parts);
      }
    };
  }

  /**
   * Each assigned partition starts at its committed offset and metadata; with no commit, or one below
   * the log's start (deleted by retention), at the log's start without metadata (rule C4). Runs in
   * poll: a WakeupException of committed or beginningOffsets leaves poll, where run stops.
   */
  private void assigned(Collection<TopicPartition> parts) {
    assignedAt = System.currentTimeMillis();
    if (parts.isEmpty()) {
      return;
    }
    Map<TopicPartition, OffsetAndMetadata> commits = consumer.committed(new HashSet<>(parts));
    Map<TopicPartition, Long> begin = consumer.beginningOffsets(parts);
    for (TopicPartition tp : parts) {
      OffsetAndMetadata c = commits.get(tp);
      long low = begin.get(tp);
      Phase.Checkpoint start = c == null || c.offset() < low
          ? new Phase.Checkpoint(low, "")
          : new Phase.Checkpoint(c.offset(), c.metadata() == null ? "" : c.metadata());
      readers.put(tp.partition(), new PhaseReader(tp.partition(), start));
      committed.put(tp.partition(), start);
      consumer.seek(tp, start.offset());
      System.err.println("start partition=" + tp.partition() + " offset=" + start.offset()
          + " metadata=" + (start.metadata().isEmpty() ? "-" : start.metadata()));
    }
  }

  /**
   * The loop. SIGTERM's wakeup ends it wherever the consumer blocks: poll (and committed and
   * beginningOffsets in the rebalance listener, which run in poll), commitSync.
   */
  private int run(AtomicBoolean stop, long idleMs) throws NewerVersion {
    long last = System.currentTimeMillis();
    try {
      while (!stop.get()) {
        ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
        for (int part : new ArrayList<>(uncommitted)) {
          commit(part);
        }
        if (recs.isEmpty()) {
          if (idleMs > 0 && System.currentTimeMillis() - Math.max(last, assignedAt) > idleMs) {
            end();
            break;
          }
          continue;
        }
        last = System.currentTimeMillis();
        for (ConsumerRecord<byte[], byte[]> r : recs) {
          feed(r);
        }
      }
    } catch (WakeupException e) {
      // SIGTERM (the shutdown hook sets stop, then wakes the consumer up): a shutdown.
    }
    return violations > 0 ? 3 : 0;
  }

  /**
   * At the idle exit, the end of the input as far as this run goes: ends every partition's reader
   * (markers.Reader.End). A reader that started without metadata reports the phases it could never
   * prove whole as skipped (MARKERS.md rule C4); what no writer completed is a violation. Nothing is
   * committed.
   */
  private void end() {
    for (Map.Entry<Integer, PhaseReader> e : new TreeMap<>(readers).entrySet()) {
      int part = e.getKey();
      PhaseReader rd = e.getValue();
      for (Violation v : rd.end()) {
        violations++;
        out.println("VIOLATION partition=" + part + ": " + v);
      }
      for (Phase.Skip s : rd.skipped()) {
        out.println("skipped phase=" + Long.toUnsignedString(s.phase()) + " partition=" + part + " records=" + s.records());
      }
    }
    out.flush();
  }

  /** Gives one record to its partition's reader, prints what it handed over, then commits its checkpoint. */
  private void feed(ConsumerRecord<byte[], byte[]> r) throws NewerVersion {
    int part = r.partition();
    PhaseReader rd = readers.get(part);
    if (rd == null) {
      return; // not ours (any more): the owner reads it
    }
    List<Rec.Header> hs = new java.util.ArrayList<>();
    for (Header h : r.headers()) {
      hs.add(new Rec.Header(h.key(), h.value()));
    }
    PhaseReader.Fed fed = rd.feed(new Rec(r.offset(), r.key(), r.value(), hs));
    for (Violation v : fed.violations()) {
      if (v.newerVersion()) {
        throw new NewerVersion("partition " + part + " offset " + r.offset() + ": " + v);
      }
    }
    for (Violation v : fed.violations()) {
      violations++;
      out.println("VIOLATION partition=" + part + ": " + v);
    }
    boolean handed = false;
    for (Phase ph = fed.phase(); ph != null; ph = rd.next()) {
      out.println(line(part, ph));
      handed = true;
    }
    for (Phase.Skip s : rd.skipped()) {
      out.println("skipped phase=" + Long.toUnsignedString(s.phase()) + " partition=" + part + " records=" + s.records());
      handed = true;
    }
    out.flush();
    if (!handed) {
      return;
    }
    // Printed, then committed: a crash between the two repeats the phases since the last commit
    // (at least once, rule C6).
    commit(part);
  }

  /**
   * Commits the checkpoint of partition part's reader. A commit refused for an error of the group
   * session (a rebalance: CommitFailedException, RebalanceInProgressException; the coordinator moved
   * or a timeout: RetriableException) is logged and tried again after the next poll, as the Go join
   * goes on with "rejoining"; the consumer rejoins by itself, and a partition it loses loses its
   * reader. Any other error, and a WakeupException, is thrown.
   */
  private void commit(int part) {
    PhaseReader rd = readers.get(part);
    Phase.Checkpoint c = rd == null ? null : rd.checkpoint();
    if (c == null || c.equals(committed.get(part))) {
      uncommitted.remove(part);
      return; // not ours any more, or rule C5: nothing proven yet
    }
    try {
      consumer.commitSync(Map.of(new TopicPartition(topic, part), new OffsetAndMetadata(c.offset(), c.metadata())));
    } catch (CommitFailedException | RebalanceInProgressException | RetriableException e) {
      System.err.println("java-reader: commit partition " + part + ": " + e + "; rejoining");
      uncommitted.add(part);
      return;
    }
    committed.put(part, c);
    uncommitted.remove(part);
  }

  /** The phase's line: records and sources as read, the marker's count and sealed_by (with several writers the sum and the weakest). */
  static String line(int partition, Phase p) {
    Map<String, Long> sources = new TreeMap<>();
    for (Rec rec : p.records) {
      String topic = "";
      for (Rec.Header h : rec.headers()) {
        if (new String(h.key(), java.nio.charset.StandardCharsets.ISO_8859_1).equals("phasegate.source")) {
          try {
            topic = Meta.parseSource(h.value());
          } catch (Meta.HeaderError e) {
            // counted under "", as a record without a source
          }
          break;
        }
      }
      sources.merge(topic, 1L, Long::sum);
    }
    String srcs = sources.entrySet().stream().map(e -> e.getKey() + ":" + e.getValue()).collect(Collectors.joining(","));
    return "phase=" + Long.toUnsignedString(p.id) + " partition=" + partition + " records=" + p.records.size()
        + " sources=" + srcs + " marker_count=" + p.marker.count + " sealed_by=" + p.marker.sealedBy;
  }
}
