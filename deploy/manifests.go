package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Objects are the Kubernetes objects of a set of manifests, by kind.
type Objects struct {
	ConfigMaps   []*corev1.ConfigMap
	Services     []*corev1.Service
	StatefulSets []*appsv1.StatefulSet
	Budgets      []*policyv1.PodDisruptionBudget
}

// docSplit separates the documents of a YAML stream.
var docSplit = regexp.MustCompile(`(?m)^---[ \t]*$`)

// Decode decodes every document of data strictly into its k8s.io/api type:
// an unknown kind, an unknown or duplicate field, or a value of the wrong
// type is an error naming the document.
func Decode(name string, data []byte, into *Objects) error {
	for i, doc := range docSplit.Split(string(data), -1) {
		if len(bytes.TrimSpace(stripComments([]byte(doc)))) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return fmt.Errorf("%s document %d: %w", name, i+1, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 ConfigMap":
			o := &corev1.ConfigMap{}
			into.ConfigMaps, obj = append(into.ConfigMaps, o), o
		case "v1 Service":
			o := &corev1.Service{}
			into.Services, obj = append(into.Services, o), o
		case "apps/v1 StatefulSet":
			o := &appsv1.StatefulSet{}
			into.StatefulSets, obj = append(into.StatefulSets, o), o
		case "policy/v1 PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			into.Budgets, obj = append(into.Budgets, o), o
		default:
			return fmt.Errorf("%s document %d: apiVersion %q kind %q is not one this validator knows", name, i+1, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return fmt.Errorf("%s document %d (%s): %w", name, i+1, tm.Kind, err)
		}
	}
	return nil
}

// DecodeDir decodes every *.yaml file of dir, in name order.
func DecodeDir(dir string) (*Objects, []string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(files)
	objs := &Objects{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		if err := Decode(filepath.Base(f), data, objs); err != nil {
			return nil, nil, err
		}
	}
	return objs, files, nil
}

// stripComments drops whole-line comments, so that a document of only
// comments counts as empty.
func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}
