package kubeclient

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
)

// The sidecar's clients for the two resources it uses, Leases and Pods.
// They are client-go's own generic typed clients (gentype), as the generated
// ones are, each on a scheme of its own API group alone: the generated
// clients import client-go's scheme of every built-in group
// (k8s.io/client-go/kubernetes/scheme), which links all of k8s.io/api into
// the binary and registers it at start-up. They satisfy elect.LeaseClient
// and podlabel.PodClient, as client-go's typed clients do.

// LeaseClient is a typed client of the Leases of namespace.
type LeaseClient = gentype.ClientWithList[*coordinationv1.Lease, *coordinationv1.LeaseList]

// PodClient is a typed client of the Pods of namespace.
type PodClient = gentype.ClientWithList[*corev1.Pod, *corev1.PodList]

// NewLeaseClient returns a client of the Leases of namespace for cfg.
func NewLeaseClient(cfg *rest.Config, namespace string) (*LeaseClient, error) {
	client, params, err := restClientFor(cfg, coordinationv1.SchemeGroupVersion, "/apis", coordinationv1.AddToScheme)
	if err != nil {
		return nil, err
	}
	return gentype.NewClientWithList[*coordinationv1.Lease, *coordinationv1.LeaseList](
		"leases", client, params, namespace,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} },
		func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} },
		gentype.PrefersProtobuf[*coordinationv1.Lease](),
	), nil
}

// NewPodClient returns a client of the Pods of namespace for cfg.
func NewPodClient(cfg *rest.Config, namespace string) (*PodClient, error) {
	client, params, err := restClientFor(cfg, corev1.SchemeGroupVersion, "/api", corev1.AddToScheme)
	if err != nil {
		return nil, err
	}
	return gentype.NewClientWithList[*corev1.Pod, *corev1.PodList](
		"pods", client, params, namespace,
		func() *corev1.Pod { return &corev1.Pod{} },
		func() *corev1.PodList { return &corev1.PodList{} },
		gentype.PrefersProtobuf[*corev1.Pod](),
	), nil
}

// restClientFor is a REST client for the group version gv under apiPath,
// configured as client-go's generated clients configure theirs
// (setConfigDefaults), on a scheme holding only that group (added by
// addToScheme) and the unversioned meta types.
func restClientFor(cfg *rest.Config, gv schema.GroupVersion, apiPath string, addToScheme func(*runtime.Scheme) error) (rest.Interface, runtime.ParameterCodec, error) {
	scheme := runtime.NewScheme()
	if err := addToScheme(scheme); err != nil {
		return nil, nil, err
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = apiPath
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, nil, err
	}
	return client, runtime.NewParameterCodec(scheme), nil
}
