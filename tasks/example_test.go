package tasks_test

import (
	"fmt"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/tasks"
)

// The task layout of issue 11's scenario M1 (forks of 7, 3 and 1
// partitions) with 3 output partitions, and the marker fields each task
// writes.
func ExampleNewLayout() {
	for _, r := range []align.Routing{align.RoutePartition, align.RouteKey} {
		l, err := tasks.NewLayout(tasks.Topology{
			Inputs:           []tasks.Input{{Topic: "a", Partitions: 7}, {Topic: "b", Partitions: 3}, {Topic: "c", Partitions: 1}},
			OutputPartitions: 3,
			Routing:          r,
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(r, "routing:", l.Len(), "tasks")
		for id := range tasks.ID(l.Len()) {
			o := l.Outputs(id)[0]
			task, writers, _ := l.MarkerFields(id, o)
			fmt.Println(" task", id, "partitions", l.Partitions(id), "outputs", l.Outputs(id), "marker on", o, "task", task, "writers", writers)
		}
	}
	// Output:
	// partition routing: 3 tasks
	//  task 0 partitions [{a 0} {a 3} {a 6} {b 0} {c 0}] outputs [0] marker on 0 task 0 writers 0
	//  task 1 partitions [{a 1} {a 4} {b 1}] outputs [1] marker on 1 task 0 writers 0
	//  task 2 partitions [{a 2} {a 5} {b 2}] outputs [2] marker on 2 task 0 writers 0
	// key routing: 3 tasks
	//  task 0 partitions [{a 0} {a 3} {a 6} {b 0} {c 0}] outputs [0 1 2] marker on 0 task 0 writers 3
	//  task 1 partitions [{a 1} {a 4} {b 1}] outputs [0 1 2] marker on 0 task 1 writers 3
	//  task 2 partitions [{a 2} {a 5} {b 2}] outputs [0 1 2] marker on 0 task 2 writers 3
}

// How a pipeline puts the Strategy into sarama's consumer group: one
// Strategy per group client, static membership for fast restarts, and the
// tasks read back in the handler's Setup.
func ExampleStrategy() {
	l, err := tasks.NewLayout(tasks.Topology{Inputs: []tasks.Input{{Topic: "orders", Partitions: 6}}, OutputPartitions: 6})
	if err != nil {
		fmt.Println(err)
		return
	}
	s := tasks.NewStrategy(l)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_9_0_0
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{s}
	cfg.Consumer.Group.InstanceId = "phasegate-0" // a stable per-instance name (KIP-345)
	// ... sarama.NewConsumerGroup(brokers, group, cfg); in Setup(sess):
	//     a, err := s.Assigned() // a.Generation == sess.GenerationID()
	a, err := s.Assigned()
	fmt.Println(s.Name(), a.Generation, a.Tasks, err, cfg.Validate() == nil)
	// Output: phasegate-tasks -1 [] <nil> true
}
