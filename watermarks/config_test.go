package watermarks

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"zero out-of-orderness and strict idleness", func(c *Config) { c.MaxOutOfOrderness, c.IdleTimeout = 0, 0 }, ""},
		{"min equals max", func(c *Config) { c.SealTimeoutMin = c.SealTimeoutMax }, ""},
		{"phase length zero", func(c *Config) { c.PhaseLength = 0 }, "PHASEGATE_PHASE_LENGTH=0s must be above 0"},
		{"phase length not whole ms", func(c *Config) { c.PhaseLength = 1500 * time.Microsecond }, "PHASEGATE_PHASE_LENGTH=1.5ms must be a whole number of milliseconds"},
		{"negative out-of-orderness", func(c *Config) { c.MaxOutOfOrderness = -time.Second }, "PHASEGATE_MAX_OUT_OF_ORDERNESS=-1s"},
		{"negative idle timeout", func(c *Config) { c.IdleTimeout = -time.Second }, "PHASEGATE_IDLE_TIMEOUT=-1s"},
		{"buffer zero", func(c *Config) { c.MaxBufferBytes = 0 }, "PHASEGATE_MAX_BUFFER_BYTES=0"},
		{"min zero", func(c *Config) { c.SealTimeoutMin = 0 }, "PHASEGATE_SEAL_TIMEOUT_MIN=0s must be above 0"},
		{"min above max", func(c *Config) { c.SealTimeoutMin, c.SealTimeoutMax = 10*time.Second, 5*time.Second },
			"PHASEGATE_SEAL_TIMEOUT_MIN=10s is above PHASEGATE_SEAL_TIMEOUT_MAX=5s"},
		{"unknown policy", func(c *Config) { c.SealPolicy = 7 }, "PHASEGATE_SEAL_POLICY=Policy(7)"},
		{"no clock", func(c *Config) { c.Now = nil }, "Config.Now"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig(newClock())
			tt.mod(&cfg)
			err := cfg.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want ErrConfig containing %q", err, tt.want)
			}
			if _, nerr := New(cfg, 0); !errors.Is(nerr, ErrConfig) {
				t.Errorf("New() error = %v, want ErrConfig", nerr)
			}
		})
	}
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    Policy
		wantErr bool
	}{
		{"wait", PolicyWait, false},
		{"seal", PolicySeal, false},
		{"", 0, true},
		{"Seal", 0, true},
		{"timeout", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePolicy(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("ParsePolicy(%q) = %v, %v", tt.in, got, err)
			}
			if err != nil && !errors.Is(err, ErrPolicy) {
				t.Errorf("error %v is not ErrPolicy", err)
			}
			var p Policy
			if uerr := p.UnmarshalText([]byte(tt.in)); (uerr != nil) != tt.wantErr || p != tt.want {
				t.Errorf("UnmarshalText(%q) = %v, %v", tt.in, p, uerr)
			}
			if !tt.wantErr && got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{CauseMarkers.String(), "markers"},
		{CauseWatermark.String(), "watermark"},
		{CauseIdle.String(), "idle"},
		{CauseTimeout.String(), "timeout"},
		{Cause(9).String(), "Cause(9)"},
		{Accepted.String(), "accepted"},
		{Late.String(), "late"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
	if b, _ := CauseIdle.MarshalText(); string(b) != "idle" {
		t.Errorf("CauseIdle.MarshalText() = %q", b)
	}
}
