package dedupe

import (
	"errors"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		wantMsg  string // "" means valid
		wantVars []string
	}{
		{name: "defaults", cfg: DefaultConfig()},
		{name: "smallest", cfg: Config{MaxSealedPhases: 1, MaxIdentities: 1}},
		{
			name:     "no identities",
			cfg:      Config{MaxSealedPhases: 64, MaxIdentities: 0},
			wantMsg:  "PHASEGATE_DEDUPE_IDS=0: must be at least 1",
			wantVars: []string{EnvMaxIdentities},
		},
		{
			name:     "negative phases",
			cfg:      Config{MaxSealedPhases: -3, MaxIdentities: 10},
			wantMsg:  "PHASEGATE_DEDUPE_PHASES=-3: must be at least 1",
			wantVars: []string{EnvMaxSealedPhases},
		},
		{
			name:     "zero value names both",
			cfg:      Config{},
			wantMsg:  "PHASEGATE_DEDUPE_PHASES=0: must be at least 1\nPHASEGATE_DEDUPE_IDS=0: must be at least 1",
			wantVars: []string{EnvMaxSealedPhases, EnvMaxIdentities},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.wantMsg)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("Validate() = %q, want %q", err, tt.wantMsg)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("errors.Is(%v, ErrInvalidConfig) = false", err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Var != tt.wantVars[0] {
				t.Errorf("errors.As ConfigError = %+v, want Var %s", ce, tt.wantVars[0])
			}
			if _, nerr := New(tt.cfg); !errors.Is(nerr, ErrInvalidConfig) {
				t.Errorf("New() error = %v, want ErrInvalidConfig", nerr)
			}
		})
	}
}
