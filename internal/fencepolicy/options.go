package fencepolicy

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Options say which Lease fences which resources.
type Options struct {
	// Lease and Namespace locate the Lease whose terms fence the objects;
	// the objects are in the same namespace.
	Lease, Namespace string
	// Resources are the fenced resources (at least one).
	Resources []Resource
}

// Resource is a resource of an API group ("" for the core group).
type Resource struct {
	Group, Resource string
}

// String is the resource as ParseResources reads it: RESOURCE, or
// GROUP/RESOURCE.
func (r Resource) String() string {
	if r.Group == "" {
		return r.Resource
	}
	return r.Group + "/" + r.Resource
}

// DefaultResources are the resources fenced when none are named.
var DefaultResources = []Resource{{Resource: "configmaps"}}

// namePrefix starts the name of the policy and its binding.
const namePrefix = "leasehold-fencing."

// Name is the name of the policy and of its binding:
// leasehold-fencing.<namespace>.<lease>.
func (o Options) Name() string { return namePrefix + o.Namespace + "." + o.Lease }

// Validate checks o: the Lease's name is a DNS subdomain of at most 63
// characters (it is the label's value), its namespace a DNS label, the
// policy's name at most 253 characters, and at least one resource, none
// twice.
func (o Options) Validate() error {
	if errs := validation.IsDNS1123Subdomain(o.Lease); o.Lease == "" || len(errs) > 0 {
		return fmt.Errorf("the Lease name %q is not a DNS subdomain: %s", o.Lease, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(o.Lease); len(errs) > 0 {
		return fmt.Errorf("the Lease name %q cannot be the value of the label %s: %s", o.Lease, FencedByLabel, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("namespace %q is not a DNS label: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(o.Name()); len(errs) > 0 {
		return fmt.Errorf("the policy's name %q: %s", o.Name(), strings.Join(errs, "; "))
	}
	if len(o.Resources) == 0 {
		return fmt.Errorf("no resource to fence")
	}
	seen := map[Resource]bool{}
	for _, r := range o.Resources {
		if seen[r] {
			return fmt.Errorf("resource %s named twice", r)
		}
		seen[r] = true
	}
	return nil
}

// ParseResources reads a comma-separated list of RESOURCE (the core group)
// or GROUP/RESOURCE, e.g. "configmaps,apps/deployments": each resource
// a DNS label (the plural, lower-case name), each group a DNS subdomain.
func ParseResources(list string) ([]Resource, error) {
	var rs []Resource
	for item := range strings.SplitSeq(list, ",") {
		var r Resource
		switch parts := strings.Split(strings.TrimSpace(item), "/"); len(parts) {
		case 1:
			r.Resource = parts[0]
		case 2:
			r.Group, r.Resource = parts[0], parts[1]
			if errs := validation.IsDNS1123Subdomain(r.Group); len(errs) > 0 {
				return nil, fmt.Errorf("resource %q: group %q is not a DNS subdomain: %s", item, r.Group, strings.Join(errs, "; "))
			}
		default:
			return nil, fmt.Errorf("resource %q: want RESOURCE or GROUP/RESOURCE (subresources are not fenced)", item)
		}
		if errs := validation.IsDNS1123Label(r.Resource); len(errs) > 0 {
			return nil, fmt.Errorf("resource %q: %q is not a resource's plural name (a DNS label): %s", item, r.Resource, strings.Join(errs, "; "))
		}
		rs = append(rs, r)
	}
	return rs, nil
}
