package fencepolicy

import (
	"bytes"

	"sigs.k8s.io/yaml"
)

// YAML renders the policy and its binding for o as one YAML stream, for
// kubectl apply -f -. o must be valid (Options.Validate).
func YAML(o Options) ([]byte, error) {
	policy, binding := Objects(o)
	var out bytes.Buffer
	for i, obj := range []any{policy, binding} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(b)
	}
	return out.Bytes(), nil
}
