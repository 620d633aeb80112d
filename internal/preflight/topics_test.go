package preflight

import (
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/internal/config"
)

// A topic the brokers refuse to describe is named as an ACL to grant, not
// as missing; a topic they do not know is named as missing; one message
// names every topic at fault.
func TestCheckTopics(t *testing.T) {
	cases := []struct {
		name   string
		exist  []string
		denied []string
		want   []string // in the error, in order; none: no error
		not    []string // not in the error
	}{
		{"all there", []string{"orders", "payments", "out"}, nil, nil, nil},
		{"an input topic denied", []string{"payments", "out"}, []string{"orders"},
			[]string{`not authorized: the brokers refuse to describe input topic of PHASEGATE_INPUT_TOPICS "orders"`, "READ on every input topic"},
			[]string{"missing on the brokers"}},
		{"the output denied", []string{"orders", "payments"}, []string{"out"},
			[]string{`not authorized`, `output topic of PHASEGATE_OUTPUT_TOPIC "out"`, "WRITE on the output topic"},
			[]string{"missing on the brokers"}},
		{"an input topic missing", []string{"orders", "out"}, nil,
			[]string{`missing on the brokers: input topic of PHASEGATE_INPUT_TOPICS "payments"`},
			[]string{"not authorized"}},
		{"one denied, one missing", []string{"orders"}, []string{"payments"},
			[]string{`not authorized: the brokers refuse to describe input topic of PHASEGATE_INPUT_TOPICS "payments"`,
				`missing on the brokers: output topic of PHASEGATE_OUTPUT_TOPIC "out"`}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := sarama.NewMockBroker(t, 1)
			defer b.Close()
			meta := sarama.NewMockMetadataResponse(t).SetBroker(b.Addr(), b.BrokerID())
			for _, topic := range c.exist {
				meta.SetLeader(topic, 0, b.BrokerID())
			}
			for _, topic := range c.denied {
				meta.SetError(topic, sarama.ErrTopicAuthorizationFailed)
			}
			b.SetHandlerByMap(map[string]sarama.MockResponse{"MetadataRequest": meta})
			sc := sarama.NewConfig()
			sc.Version = sarama.V3_0_0_0
			sc.ApiVersionsRequest = false // the mock broker does not answer it
			client, err := sarama.NewClient([]string{b.Addr()}, sc)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			err = checkTopics(client, config.Config{InputTopics: []string{"orders", "payments"}, OutputTopic: "out"})
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			msg, at := err.Error(), 0
			for _, w := range c.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("%q not in %q after byte %d", w, msg, at)
				}
				at += i + len(w)
			}
			for _, n := range c.not {
				if strings.Contains(msg, n) {
					t.Errorf("%q in %q", n, msg)
				}
			}
		})
	}
}
