package align

import (
	"errors"
	"testing"
)

// Kafka's own partitioner test vectors (clients/src/test/.../UtilsTest.java,
// testMurmur2): the Java producer places these keys with this hash.
func TestMurmur2MatchesKafka(t *testing.T) {
	cases := []struct {
		key  string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			if got := int32(murmur2([]byte(c.key))); got != c.want {
				t.Fatalf("murmur2(%q) = %d, want %d", c.key, got, c.want)
			}
		})
	}
}

func TestRoute(t *testing.T) {
	cases := []struct {
		name    string
		routing Routing
		key     []byte
		in, out int32
		want    int32
	}{
		{"partition: p mod P_out", RoutePartition, []byte("k"), 5, 3, 2},
		{"partition: same index", RoutePartition, nil, 1, 4, 1},
		{"key: murmur2 positive mod P_out", RouteKey, []byte("foobar"), 0, 7, (-790332482 & 0x7fffffff) % 7},
		{"key: null key falls back to partition", RouteKey, nil, 3, 2, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.routing.route(c.key, c.in, c.out); got != c.want {
				t.Fatalf("route = %d, want %d", got, c.want)
			}
		})
	}
}

func BenchmarkRouteKey(b *testing.B) {
	key := []byte("customer-000042")
	b.ReportAllocs()
	for b.Loop() {
		RouteKey.route(key, 0, 12)
	}
}

// PHASEGATE_ROUTING's two spellings read back as what String writes, and
// nothing else is a routing.
func TestParseRouting(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want Routing
		ok   bool
	}{
		{"partition", "partition", RoutePartition, true},
		{"key", "key", RouteKey, true},
		{"upper case", "KEY", 0, false},
		{"empty", "", 0, false},
		{"unknown", "random", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRouting(c.in)
			if !c.ok {
				if !errors.Is(err, ErrRouting) {
					t.Fatalf("ParseRouting(%q) = %v, %v; want ErrRouting", c.in, got, err)
				}
				return
			}
			if err != nil || got != c.want || got.String() != c.in {
				t.Fatalf("ParseRouting(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
		})
	}
}
