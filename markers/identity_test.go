package markers

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestAppendIdentity(t *testing.T) {
	tests := []struct {
		name      string
		id        []byte
		topic     string
		partition int32
		offset    int64
		want      string
	}{
		{"2/identity is phasegate.id when present", []byte("order-7"), "orders", 3, 17, "order-7"},
		{"2/identity is opaque bytes", []byte{0, 0xff, '/'}, "orders", 3, 17, "\x00\xff/"},
		{"2/identity without id is topic/partition/offset", nil, "orders", 3, 17, "orders/3/17"},
		{"2/identity of an empty id is topic/partition/offset", []byte{}, "orders", 3, 17, "orders/3/17"},
		{"2/identity: offset 0", nil, "a", 0, 0, "a/0/0"},
		{"2/identity: largest partition and offset", nil, "t", math.MaxInt32, math.MaxInt64, "t/2147483647/9223372036854775807"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendIdentity([]byte("pre:"), tt.id, tt.topic, tt.partition, tt.offset)
			if string(got) != "pre:"+tt.want {
				t.Fatalf("AppendIdentity = %q, want %q", got, "pre:"+tt.want)
			}
		})
	}
}

// TestIdentityReplay: a replay of the same input offsets yields the same
// identities, and different offsets different ones (MARKERS.md section 2).
func TestIdentityReplay(t *testing.T) {
	seen := map[string]bool{}
	for p := int32(0); p < 12; p++ {
		for off := int64(0); off < 120; off++ {
			a := string(AppendIdentity(nil, nil, "orders", p, off))
			if b := string(AppendIdentity(nil, nil, "orders", p, off)); a != b {
				t.Fatalf("replay of %d/%d: %q != %q", p, off, a, b)
			}
			if seen[a] {
				t.Fatalf("identity %q for two offsets", a)
			}
			seen[a] = true
		}
	}
}

func TestParseSource(t *testing.T) {
	long := strings.Repeat("t", 249)
	tests := []struct {
		name      string
		in        string
		topic     string
		partition int32
		offset    int64
		ok        bool
	}{
		{"2/source is topic/partition/offset", "orders/3/17", "orders", 3, 17, true},
		{"2/source: every topic byte Kafka allows", "Or.d_e-rs9/0/0", "Or.d_e-rs9", 0, 0, true},
		{"2/source: topic of 249 bytes", long + "/1/2", long, 1, 2, true},
		{"2/source: largest partition and offset", "t/2147483647/9223372036854775807", "t", math.MaxInt32, math.MaxInt64, true},
		{"2/source: topic with dots", "..x/1/2", "..x", 1, 2, true},

		{"2/source: topic of 250 bytes", long + "t/1/2", "", 0, 0, false},
		{"2/source: topic may not contain '/'", "a/b/1/2", "", 0, 0, false},
		{"2/source: empty topic", "/1/2", "", 0, 0, false},
		{"2/source: topic '.'", "./1/2", "", 0, 0, false},
		{"2/source: topic '..'", "../1/2", "", 0, 0, false},
		{"2/source: topic with a space", "my topic/1/2", "", 0, 0, false},
		{"2/source: missing offset", "orders/3/", "", 0, 0, false},
		{"2/source: missing partition", "orders//17", "", 0, 0, false},
		{"2/source: only two parts", "orders/3", "", 0, 0, false},
		{"2/source: no slash", "orders", "", 0, 0, false},
		{"2/source: empty", "", "", 0, 0, false},
		{"2/source: negative partition", "orders/-1/17", "", 0, 0, false},
		{"2/source: negative offset", "orders/3/-1", "", 0, 0, false},
		{"2/source: plus sign", "orders/+3/17", "", 0, 0, false},
		{"2/source: leading zero in partition", "orders/03/17", "", 0, 0, false},
		{"2/source: leading zero in offset", "orders/3/017", "", 0, 0, false},
		{"2/source: partition over int32", "orders/2147483648/17", "", 0, 0, false},
		{"2/source: offset over int64", "orders/3/9223372036854775808", "", 0, 0, false},
		{"2/source: trailing newline", "orders/3/17\n", "", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic, partition, offset, err := ParseSource([]byte(tt.in))
			if tt.ok != (err == nil) {
				t.Fatalf("ParseSource(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrSource) {
				t.Fatalf("ParseSource(%q) error %v does not wrap ErrSource", tt.in, err)
			}
			if topic != tt.topic || partition != tt.partition || offset != tt.offset {
				t.Fatalf("ParseSource(%q) = %q, %d, %d; want %q, %d, %d", tt.in, topic, partition, offset, tt.topic, tt.partition, tt.offset)
			}
			if tt.ok {
				if back := string(AppendSource(nil, topic, partition, offset)); back != tt.in {
					t.Fatalf("AppendSource(ParseSource(%q)) = %q", tt.in, back)
				}
			}
		})
	}
}
