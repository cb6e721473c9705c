package kubeclient

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
)

// ServerVersion reads the apiserver's version, GET /version, as client-go's
// discovery client does (DiscoveryClient.ServerVersion), without linking
// discovery. Kubernetes' default RBAC lets every client read it (the
// ClusterRole system:public-info-viewer, bound to system:authenticated
// and system:unauthenticated). ctx bounds the request.
func ServerVersion(ctx context.Context, cfg *rest.Config) (version.Info, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion, c.APIPath = nil, ""
	// /version answers JSON only.
	c.ContentType, c.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return version.Info{}, err
	}
	body, err := client.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return version.Info{}, fmt.Errorf("GET /version: %w", err)
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return version.Info{}, fmt.Errorf("GET /version: %w", err)
	}
	return info, nil
}
