// Command pgbench is the measurement side of `make bench`: on one real
// Apache Kafka broker (started by bench/run.sh with e2e/kafka/kafka.sh) it
// measures, in one run, Kafka's own tools and phasegate on the same records,
// and writes a markdown table to bench/results/<date>-<machine>.md.
//
// Per record size (BENCH_SIZES, default 100 and 1024 bytes of value) it runs:
//
//  1. ceiling: ProducerPerformance (idempotent, acks=all) writes
//     BENCH_RECORDS records into a 5-partition topic; ConsumerPerformance
//     reads them back.
//  2. input: the same number of records of the same size, written once into
//     two fork topics (3 and 2 partitions, round robin) by a franz-go
//     producer, non-transactionally (so Kafka's copier can finish), with
//     synthetic timestamps spaced 1/R apart, R being the input rate
//     (BENCH_INPUT_RATE, default the ceiling producer's records/s of this
//     run). A phase of length L then holds R×L records, as it would if the
//     forks' producers wrote live at the ceiling rate. After the last record,
//     each partition gets one trailer record 10 s later in event time: it
//     moves every partition's watermark past the last real phase under any
//     phase length, and stays buffered itself (it is not counted).
//  3. peer, per phase length L (BENCH_PHASES, default 100ms and 1s):
//     TransactionalMessageCopier, one per fork topic in group mode, running
//     at once, with --transaction-size R×L (its max.poll.records, so a
//     transaction holds at most one phase's worth of records). It runs at a
//     few thousand records/s, so it copies at most BENCH_COPIER_RECORDS
//     (the first records of the same input, in topics of its own).
//  4. phasegate, per L: the sidecar binary relays the input into a fresh
//     output topic. Relay time is from the sidecar's exec to the moment a
//     read_committed fetch sees the marker of the last phase on every output
//     partition. Its CPU (utime+stime) and peak RSS (VmHWM) come from /proc
//     at that moment. The output is then read whole and checked (untimed).
//  5. paced, per L: fresh topics; a producer writes live (timestamps = now)
//     at half of phasegate's relay rate for BENCH_PACED_DURATION while a
//     read_committed consumer records, for each marker, receive time minus
//     the marker's record timestamp (the sealing time): seal → visible.
//  6. streams, per BENCH_STREAMS_THREADS entry (default 1 and 2): the Kafka
//     Streams pass-through of bench/streams (exactly_once_v2,
//     commit.interval.ms 100) over the same input, into an output topic of
//     its own. Time is from the JVM's exec to the moment its consumer group
//     committed every input offset (with exactly_once_v2, in the transaction
//     that wrote the output); the output is then counted (untimed). With
//     paced, it is then paced at BENCH_PACED_SHARE of its own rate on fresh
//     topics and every output record timed (receive − record timestamp);
//     phasegate's paced runs time their data records the same way.
//
// Then a skew run (1 KiB records): fork A's records carry a key, 70 % of them
// the hot key (all on A/0, as a key-hashing producer would put them), fork B
// runs 200 ms behind (its timestamps trail A's by 200 ms at the same log
// position), PHASEGATE_ROUTING=key and PHASEGATE_MAX_BUFFER_BYTES =
// BENCH_SKEW_BUFFER_BYTES; it reports peak RSS against that bound.
//
// Then, per BENCH_PARTITIONS entry (default 5, 512 and 2048 input
// partitions in all, over two forks), the partitions step: records keyed
// over BENCH_PARTITIONS_KEYS values, stamped from BENCH_PARTITIONS_AGE in the
// past, relayed by phasegate (1 s phases, PHASEGATE_IDLE_TIMEOUT=1s) while
// /phases is polled for partitions that hold the watermark with lag and do
// not advance, then by the Kafka Streams pass-through, then by the sarama
// floor (floor.go: sarama alone copying the input, without alignment,
// headers or transactions, at phasegate's fetch size for the layout and at
// sarama's default when that differs); the row's topics are deleted afterwards.
//
// Then the instances step (issue 11): one input of BENCH_RECORDS records,
// forks of 6 + 6 partitions, an output of 6 (partition routing: 6 tasks),
// relayed by each count of BENCH_INSTANCES sidecars (one group, a
// transactional ID each, which is also the static instance ID): records/s,
// CPU summed over the instances, the output verified; the run of
// BENCH_INSTANCES_KILL instances SIGKILLs its last instance once half the
// records are out, restarts it at once with the same ID, and times restart
// → the fleet's next commit and restart → the restarted instance's own
// first commit.
//
// Issue 34's rows: the partitions step ends with a heavy row (512
// partitions, ~230,000 records per 1 s phase; BENCH_PARTITIONS_HEAVY) that
// traces the sidecar's first transactions (txntrace.go); the recovery step
// SIGKILLs and restarts one of 1 or 3 instances under paced input with an
// empty fork partition, and the Kafka Streams pass-through likewise
// (recovery.go); the lanes step relays key-routed input with 3 instances
// of 3 tasks and 1 of 1, paced and up front, against Streams with 3 and 1
// instances (lanes.go). Both read their output whole with read_committed
// while polling its last stable offsets (outwatch.go) and judge it the way
// a reader does: a phase is complete once every lane marked it (laneview.go).
// BENCH_SKEW_TASKS alternates the skew relay over PHASEGATE_TASKS values.
//
// Before anything is timed, the broker's internal topics are created
// (FindCoordinator for a group and a transactional ID). ProducerPerformance
// and each relay run BENCH_REPEAT times and the median run is reported;
// BENCH_COMPARE alternates a second sidecar build with the first in every
// relay repetition (an A/B on a shared, noisy machine).
//
// Invariants of the measurement:
//   - Every run of phasegate, of the copier and of Kafka Streams reads the
//     same input topics; every run writes to an output topic of its own.
//   - A Kafka Streams rate is reported only when its output held exactly
//     as many records as the input's offsets (trailers included).
//   - A phasegate throughput number is reported only for a run whose output
//     verified (data records = input records, every marker's count equals the
//     data records before it on its partition, marker phases strictly
//     increase, nothing quarantined); otherwise the row says why it failed.
//   - MB/s is records/s × value size / 10^6 for every row, so rows compare;
//     keys, headers and phasegate's added headers are not counted.
//
// Configuration is read once from BENCH_* variables (see config.go).
package main
