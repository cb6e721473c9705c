package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/leasehold/leasehold/internal/fencepolicy"
)

// fencingPolicyCommand is `leasehold fencing-policy`: the
// ValidatingAdmissionPolicy and its binding that make the apiserver refuse
// a deposed leader's writes to the Lease's fenced objects, as YAML on
// stdout (internal/fencepolicy).
func fencingPolicyCommand() *command {
	c := &command{
		name:    "fencing-policy",
		summary: "print the admission policy that fences writes to Kubernetes objects (docs/using.md)",
		usage:   "leasehold fencing-policy --lease NAME [--namespace NS] [--resources configmaps,apps/deployments,...]",
	}
	type values struct{ lease, namespace, resources string }
	flags := func() (*flag.FlagSet, *values) {
		v := &values{}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		fs.StringVar(&v.lease, "lease", "", "the Lease whose terms fence the objects (required)")
		fs.StringVar(&v.namespace, "namespace", "default", "the Lease's namespace, which is the fenced objects'")
		fs.StringVar(&v.resources, "resources", "configmaps", "the fenced resources: RESOURCE (core group) or GROUP/RESOURCE, comma-separated")
		return fs, v
	}
	c.help = func(w io.Writer, _ func(string) string) {
		fs, _ := flags()
		printCommandHelp(w, c, `
Prints, as YAML for 'kubectl apply -f -', a ValidatingAdmissionPolicy and its
ValidatingAdmissionPolicyBinding (admissionregistration.k8s.io/v1, both
cluster-scoped) with which the kube-apiserver refuses a deposed leader's
writes. An object of the resources in the Lease's namespace labelled
`+fencepolicy.FencedByLabel+`=NAME is fenced: each create and update must carry
the annotation `+fencepolicy.TokenAnnotation+` with the writer's token, not lower
than the stored object's nor than the current term's on the Lease; a delete
needs `+fencepolicy.DeletableAnnotation+`="true" written by the current term and a
resourceVersion precondition. Run the sidecar with LEASEHOLD_FENCING_FLOOR=true.

  leasehold fencing-policy --lease orders --namespace shop | kubectl apply -f -`, fs,
			"Exit status: 0 printed; 1 the YAML could not be written; 2 a usage error (an unknown flag, a missing --lease, a bad value).\n")
	}
	c.run = func(args []string, e *env) int {
		fs, v := flags()
		if status, done := parseFlags(fs, c, args, e); done {
			return status
		}
		if v.lease == "" {
			return usageError(e, c, "--lease is required")
		}
		resources, err := fencepolicy.ParseResources(v.resources)
		if err != nil {
			return usageError(e, c, "--resources: "+err.Error())
		}
		o := fencepolicy.Options{Lease: v.lease, Namespace: v.namespace, Resources: resources}
		if err := o.Validate(); err != nil {
			return usageError(e, c, err.Error())
		}
		out, err := fencepolicy.YAML(o)
		if err == nil {
			_, err = e.stdout.Write(out)
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "leasehold %s: %v\n", c.name, err)
			return exitFailed
		}
		return exitDone
	}
	return c
}
