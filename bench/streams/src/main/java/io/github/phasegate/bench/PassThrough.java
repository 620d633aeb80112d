package io.github.phasegate.bench;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The Kafka Streams peer of `make bench`: a pass-through of the fork topics
 * into one output topic, as a user would write it, with
 * processing.guarantee=exactly_once_v2 and commit.interval.ms=100. Keys,
 * values and timestamps are copied unchanged (byte arrays, no decoding).
 *
 * <p>Usage: PassThrough BOOTSTRAP APPLICATION_ID INPUT[,INPUT...] OUTPUT THREADS STATE_DIR [INSTANCE_ID]
 *
 * <p>INSTANCE_ID, when given and not empty, makes the instance a static member of its group
 * (group.instance.id, KIP-345): restarted within the session timeout, it gets its tasks back
 * without a rebalance.
 *
 * <p>It prints "state RUNNING" (and every other state change) on stdout, and
 * runs until SIGTERM, when it closes within 30 s. Exit status 2 on bad
 * arguments, 1 when Streams stops with an error.
 */
public final class PassThrough {
  private PassThrough() {}

  public static void main(String[] args) throws InterruptedException {
    if (args.length != 6 && args.length != 7) {
      System.err.println(
          "usage: PassThrough BOOTSTRAP APPLICATION_ID INPUT[,INPUT...] OUTPUT THREADS STATE_DIR"
              + " [INSTANCE_ID]");
      System.exit(2);
    }
    int threads;
    try {
      threads = Integer.parseInt(args[4]);
    } catch (NumberFormatException e) {
      threads = 0;
    }
    if (threads < 1) {
      System.err.println("PassThrough: THREADS=" + args[4] + ": a whole number of at least 1");
      System.exit(2);
    }
    List<String> inputs = Arrays.asList(args[2].split(","));

    Properties p = new Properties();
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
    p.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
    p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    if (args.length == 7 && !args[6].isEmpty()) {
      p.put(StreamsConfig.mainConsumerPrefix("group.instance.id"), args[6]);
    }

    StreamsBuilder b = new StreamsBuilder();
    b.stream(inputs, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
        .to(args[3], Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));

    KafkaStreams streams = new KafkaStreams(b.build(), p);
    CountDownLatch stopped = new CountDownLatch(1);
    final int[] status = {0};
    streams.setStateListener(
        (now, before) -> {
          System.out.println("state " + now);
          System.out.flush();
          if (now == KafkaStreams.State.ERROR) {
            status[0] = 1;
            stopped.countDown();
          }
        });
    streams.setUncaughtExceptionHandler(
        e -> {
          System.err.println("PassThrough: stream thread failed: " + e);
          return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
              .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  streams.close(Duration.ofSeconds(30));
                  stopped.countDown();
                }));
    streams.start();
    stopped.await();
    streams.close(Duration.ofSeconds(30));
    System.exit(status[0]);
  }
}
