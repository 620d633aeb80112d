package markers

import "strconv"

// PartitionRoute returns the output partition of a record read from input
// partition p under the default routing, p mod outPartitions (MARKERS.md
// section 4). It keeps co-partitioned inputs co-partitioned. outPartitions
// must be positive and p non-negative; it panics otherwise, as a
// programming error.
func PartitionRoute(p, outPartitions int32) int32 {
	if outPartitions <= 0 || p < 0 {
		panic("markers: PartitionRoute(" + itoa(int64(p)) + ", " + itoa(int64(outPartitions)) + ")")
	}
	return p % outPartitions
}

// KeyRoute returns the output partition of a record with a non-null key
// under PHASEGATE_ROUTING=key: toPositive(murmur2(key)) mod outPartitions,
// what Kafka's Java producer computes for a keyed record, so a Java or
// librdkafka (murmur2_random) client agrees. MARKERS.md does not say where
// a null key goes; that is the caller's decision. outPartitions must be
// positive; it panics otherwise.
func KeyRoute(key []byte, outPartitions int32) int32 {
	if outPartitions <= 0 {
		panic("markers: KeyRoute with " + itoa(int64(outPartitions)) + " partitions")
	}
	return int32(uint32(Murmur2(key))&0x7fffffff) % outPartitions
}

// Murmur2 is Kafka's org.apache.kafka.common.utils.Utils.murmur2, bit for
// bit (seed 0x9747b28c, little-endian blocks). It never allocates.
func Murmur2(data []byte) int32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	n := len(data)
	h := uint32(seed) ^ uint32(n)
	for ; len(data) >= 4; data = data[4:] {
		k := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16 | uint32(data[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
