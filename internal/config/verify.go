package config

import (
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// VerifyEnv is the part of the environment `sidecar verify` reads: the
// sidecar's connection settings, and its topic names as defaults for the
// flags.
type VerifyEnv struct {
	Brokers         []string      `env:"BROKERS,required,notEmpty"`
	OutputTopic     string        `env:"OUTPUT_TOPIC"`
	InputTopics     []string      `env:"INPUT_TOPICS"`
	QuarantineTopic string        `env:"QUARANTINE_TOPIC"`
	PhaseLength     time.Duration `env:"PHASE_LENGTH" envDefault:"1s"`
	KafkaVersion    string        `env:"KAFKA_VERSION" envDefault:"3.9.0"`
	ClientID        string        `env:"CLIENT_ID" envDefault:"phasegate"`
	Security
}

// LoadVerify reads and checks VerifyEnv from environ, the process
// environment that main hands over. Every error is an *Error of one line
// naming the variable, as Load's are.
func LoadVerify(environ map[string]string) (VerifyEnv, error) {
	e, err := env.ParseAsWithOptions[VerifyEnv](env.Options{Prefix: Prefix, Environment: environ})
	if err != nil {
		return e, envError(err, environ)
	}
	for _, b := range e.Brokers {
		if !strings.Contains(b, ":") {
			return e, BadVar("BROKERS", strings.Join(e.Brokers, ","), "each broker is host:port")
		}
	}
	if _, err := ParseKafkaVersion(e.KafkaVersion); err != nil {
		return e, err
	}
	if err := e.Security.Resolve(environ); err != nil {
		return e, err
	}
	return e, nil
}
