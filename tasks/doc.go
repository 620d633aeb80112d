// Package tasks is phasegate's unit of work across instances (docs/DESIGN.md,
// "Beyond one machine"): the fixed task set of a topology (Layout), the
// assignment of whole tasks to consumer group members (Assign, and
// Strategy, the sarama BalanceStrategy that runs it inside the group
// protocol), and the per-member assignment user data that carries
// stickiness through rebalances (AppendAssignment, DecodeAssignment).
//
// The global watermark that the tasks' owners exchange through a
// compacted topic is in package fleet.
//
// Invariants:
//   - The task set depends on the topology only (input topics and their
//     partition counts, output partitions, routing), never on the number
//     of instances: every instance computes the same Layout. The settings
//     every instance of a group must share (Layout.Settings: the topology
//     plus the output topic, phase length and out-of-orderness bound)
//     travel in the group protocol: Strategy plans tasks only for members
//     with the group's settings (those of the running fleet), and
//     Strategy.Assigned returns a *SettingsError to any other member,
//     which must stop. Layout.Fingerprint hashes the settings for the
//     watermark reports (docs/FLEET.md F1).
//   - Every input partition belongs to exactly one task; every task holds
//     at least one; every output partition has at least one writer. With
//     align.RoutePartition each output partition has exactly one writer, so
//     the output stays wire format version 1 (MARKERS.md section 3.2); with
//     align.RouteKey every task writes every output partition (section
//     3.3).
//   - Tasks move whole: a plan gives all partitions of a task to one
//     member; Layout.TasksOf rejects claims holding part of a task.
//   - Assign is pure and deterministic; its shares differ by at most one;
//     it moves the fewest tasks any balanced assignment can, given the
//     members' valid claims (newest generation wins).
//
// Layout, Assign and the encoding functions are pure and safe for
// concurrent use. The package imports sarama only for the BalanceStrategy
// interface and its types, and align only for its Routing; it opens no
// connection.
package tasks
