package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// machine describes the host a run measured.
type machine struct {
	ID      string // first 8 hex digits of /etc/machine-id, else the host name
	CPU     string
	Cores   int
	MemGiB  float64
	Kernel  string
	LoadAvg string // /proc/loadavg's 1, 5 and 15 minute averages at the start
}

func describeMachine() machine {
	m := machine{Cores: runtime.NumCPU()}
	if b, err := os.ReadFile("/etc/machine-id"); err == nil && len(strings.TrimSpace(string(b))) >= 8 {
		m.ID = strings.TrimSpace(string(b))[:8]
	} else if h, err := os.Hostname(); err == nil {
		m.ID = h
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPU = cpuModel(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemGiB = memTotalGiB(string(b))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return m
}

func cpuModel(cpuinfo string) string {
	for _, line := range strings.Split(cpuinfo, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memTotalGiB(meminfo string) float64 {
	for _, line := range strings.Split(meminfo, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == "MemTotal" {
			if f := strings.Fields(v); len(f) > 0 {
				if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
					return kb / (1 << 20)
				}
			}
		}
	}
	return 0
}

// brokerPID reads the pid kafka.sh wrote for the broker in dir.
func brokerPID(dir string) (int, error) {
	if dir == "" {
		return 0, fmt.Errorf("pgbench: no BENCH_KAFKA_DIR")
	}
	b, err := os.ReadFile(filepath.Join(dir, "broker.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
