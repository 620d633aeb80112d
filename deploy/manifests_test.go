package deploy

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// shutdownGrace is the sidecar's two-phase shutdown bound
// (cmd/sidecar: shutdownGrace).
const shutdownGrace = 25

// fullBuffer is what the sidecar may hold with its buffer full: Go's soft
// memory limit (cmd/sidecar: limitMemory, twice the bound + 48 MiB) plus
// the binary's resident pages (about 17 MiB).
func fullBuffer(bound int64) int64 { return 2*bound + 64<<20 }

func decodeAll(t *testing.T) *Objects {
	t.Helper()
	objs, files, err := DecodeDir("kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Logf("strict decode into k8s.io/api types: %s OK", filepath.Base(f))
	}
	if len(objs.StatefulSets) != 1 || len(objs.ConfigMaps) != 1 || len(objs.Services) != 1 {
		t.Fatalf("want one StatefulSet, ConfigMap and Service; got %d, %d, %d", len(objs.StatefulSets), len(objs.ConfigMaps), len(objs.Services))
	}
	return objs
}

// The validator rejects what Kubernetes would reject or silently ignore.
func TestDecodeRejects(t *testing.T) {
	const pod = "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n"
	cases := []struct{ name, doc, want string }{
		{"unknown field", pod + "  clusterIP: None\n  selectr: {a: b}\n", "unknown field"},
		{"misplaced field", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers:\n        - name: a\n          livenessProbe: {httpGet: {path: /healthz, port: 9464}, initialDelay: 3}\n", "unknown field"},
		{"wrong type", pod + "  ports: [{port: nine}]\n", "cannot unmarshal"},
		{"duplicate field", pod + "  clusterIP: None\n  clusterIP: 10.0.0.1\n", "already set"},
		{"unknown kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", "not one this validator knows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Decode("test.yaml", []byte(c.doc), &Objects{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func container(t *testing.T, pod corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range pod.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

// The StatefulSet gives the sidecar what it needs to run safely.
func TestStatefulSetRunsTheSidecarSafely(t *testing.T) {
	objs := decodeAll(t)
	ss := objs.StatefulSets[0]
	pod := ss.Spec.Template.Spec
	pg := container(t, pod, "phasegate")
	env := map[string]corev1.EnvVar{}
	for _, e := range pg.Env {
		env[e.Name] = e
	}
	cm := objs.ConfigMaps[0].Data
	bound, err := strconv.ParseInt(cm["PHASEGATE_MAX_BUFFER_BYTES"], 10, 64)
	if err != nil {
		t.Fatalf("the ConfigMap must set PHASEGATE_MAX_BUFFER_BYTES, which the memory limit is sized for: %v", err)
	}
	preStop := int64(0)
	if h := pg.Lifecycle; h != nil && h.PreStop != nil && h.PreStop.Sleep != nil {
		preStop = h.PreStop.Sleep.Seconds
	}
	grace := int64(30)
	if pod.TerminationGracePeriodSeconds != nil {
		grace = *pod.TerminationGracePeriodSeconds
	}
	limit := pg.Resources.Limits[corev1.ResourceMemory]
	request := pg.Resources.Requests[corev1.ResourceMemory]
	port := strconv.Itoa(int(pg.Ports[0].ContainerPort))
	checks := []struct {
		name string
		ok   bool
	}{
		{"transactional ID from the pod name", env["POD_NAME"].ValueFrom != nil && env["POD_NAME"].ValueFrom.FieldRef != nil &&
			env["POD_NAME"].ValueFrom.FieldRef.FieldPath == "metadata.name" && strings.Contains(env["PHASEGATE_TRANSACTIONAL_ID"].Value, "$(POD_NAME)")},
		{"POD_NAME defined before its use", len(pg.Env) > 1 && pg.Env[0].Name == "POD_NAME"},
		{"liveness on /healthz", pg.LivenessProbe != nil && pg.LivenessProbe.HTTPGet != nil && pg.LivenessProbe.HTTPGet.Path == "/healthz"},
		{"readiness on /readyz", pg.ReadinessProbe != nil && pg.ReadinessProbe.HTTPGet != nil && pg.ReadinessProbe.HTTPGet.Path == "/readyz"},
		{"preStop then the 25 s shutdown fit the grace period", preStop > 0 && grace >= preStop+shutdownGrace+5},
		{"memory limit at least twice the bound + 64 MiB", !limit.IsZero() && limit.Value() >= fullBuffer(bound)},
		{"memory request at least the bound + 48 MiB", request.Value() >= bound+48<<20 && request.Cmp(limit) <= 0},
		{"pod runs as non-root", pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot},
		{"Prometheus scrape annotations on the metrics port", ss.Spec.Template.Annotations["prometheus.io/scrape"] == "true" &&
			ss.Spec.Template.Annotations["prometheus.io/port"] == port && ss.Spec.Template.Annotations["prometheus.io/path"] == "/metrics"},
		{"governing Service exists", objs.Services[0].Name == ss.Spec.ServiceName && objs.Services[0].Spec.ClusterIP == "None"},
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		checks = append(checks, struct {
			name string
			ok   bool
		}{"container " + c.Name + ": read-only root, no privilege escalation, no capabilities",
			sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem &&
				sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation &&
				sc.Capabilities != nil && len(sc.Capabilities.Drop) == 1 && sc.Capabilities.Drop[0] == "ALL"})
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if !c.ok {
				t.Fatalf("statefulset.yaml: %s: not so", c.name)
			}
		})
	}
	t.Logf("memory: bound %d MiB, request %s, limit %s; grace %d s = preStop %d s + shutdown %d s + %d s",
		bound>>20, request.String(), limit.String(), grace, preStop, shutdownGrace, grace-preStop-shutdownGrace)
}

// The sidecar's environment in the manifests (ConfigMap + container env,
// $(POD_NAME) expanded as the kubelet does) is a configuration the sidecar
// accepts: `sidecar config` exits 0 and shows the pod's transactional ID.
func TestManifestEnvironmentIsAValidConfiguration(t *testing.T) {
	objs := decodeAll(t)
	bin := filepath.Join(t.TempDir(), "sidecar")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sidecar")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the sidecar: %v\n%s", err, out)
	}
	pg := container(t, objs.StatefulSets[0].Spec.Template.Spec, "phasegate")
	env := []string{}
	for k, v := range objs.ConfigMaps[0].Data {
		env = append(env, k+"="+v)
	}
	for _, e := range pg.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			v = "join-0"
		}
		env = append(env, e.Name+"="+strings.ReplaceAll(v, "$(POD_NAME)", "join-0"))
	}
	cmd := exec.Command(bin, "config")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sidecar config rejects the manifests' environment: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "phasegate-join-0") {
		t.Fatalf("the transactional ID is not the pod's:\n%s", out)
	}
	t.Logf("sidecar config accepts the manifests' environment (PHASEGATE_TRANSACTIONAL_ID=phasegate-join-0)")
}
