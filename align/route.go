package align

import (
	"errors"
	"fmt"
	"strconv"
)

// Routing picks the output partition of a data record (MARKERS.md section
// 4). It is the project's one routing type: tasks.Topology takes it to
// decide which tasks write which output partitions, proxy.Config and
// internal/config (through ParseRouting) pass it on.
type Routing int

const (
	// RoutePartition sends input partition p to output partition p mod P_out,
	// keeping co-partitioned inputs co-partitioned for the join.
	RoutePartition Routing = iota
	// RouteKey sends a record to murmur2(key) mod P_out, as Kafka's Java
	// producer does; a record without a key falls back to RoutePartition.
	// Any task may write any output partition.
	RouteKey
)

// ErrRouting: a routing spelt neither "partition" nor "key".
var ErrRouting = errors.New("align: unknown routing")

// ParseRouting reads the PHASEGATE_ROUTING spelling, "partition" or "key"
// (String's inverse); anything else is an error wrapping ErrRouting.
func ParseRouting(s string) (Routing, error) {
	switch s {
	case "partition":
		return RoutePartition, nil
	case "key":
		return RouteKey, nil
	}
	return 0, fmt.Errorf("%w %q (want \"partition\" or \"key\")", ErrRouting, s)
}

// String returns the PHASEGATE_ROUTING spelling; tasks.Layout's settings
// (and so its fingerprint) are made of it.
func (r Routing) String() string {
	switch r {
	case RoutePartition:
		return "partition"
	case RouteKey:
		return "key"
	}
	return "Routing(" + strconv.Itoa(int(r)) + ")"
}

// route returns the output partition for a record of input partition p.
func (r Routing) route(key []byte, p, outPartitions int32) int32 {
	if r == RouteKey && key != nil {
		return int32(murmur2(key)&0x7fffffff) % outPartitions
	}
	return p % outPartitions
}

// murmur2 is Kafka's Utils.murmur2 (seed 0x9747b28c), the hash behind the
// Java producer's default partitioner, so Java, librdkafka (with the
// murmur2_random partitioner) and phasegate agree on key placement.
func murmur2(data []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	i := 0
	for ; n-i >= 4; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch n - i {
	case 3:
		h ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[i])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
