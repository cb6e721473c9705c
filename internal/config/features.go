package config

import (
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leasehold/leasehold/internal/podlabel"
)

// AppHealth configures health-gated candidacy: the sidecar campaigns only
// while the app's health endpoint answers 2xx, and steps down and releases
// the Lease when it fails FailureThreshold probes in a row.
type AppHealth struct {
	// URL is probed with GET (LEASEHOLD_APP_HEALTH_URL; empty turns the
	// feature off).
	URL string
	// Timeout bounds each probe (LEASEHOLD_APP_HEALTH_TIMEOUT, default 1s,
	// at most Interval).
	Timeout time.Duration
	// Interval is the time between probes (LEASEHOLD_APP_HEALTH_INTERVAL,
	// default 2s).
	Interval time.Duration
	// FailureThreshold is how many failed probes in a row make the app
	// unhealthy (LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD, default 3).
	FailureThreshold int
}

// Enabled reports whether health-gated candidacy is on.
func (a AppHealth) Enabled() bool { return a.URL != "" }

// PodRef names the Pod the sidecar runs in.
type PodRef struct {
	Namespace string // POD_NAMESPACE, else the service-account namespace file
	Name      string // POD_NAME
}

// appHealth checks rule 10. With no URL it returns the zero AppHealth, and
// an error if a tuning variable was set anyway.
func appHealth(s spec) (AppHealth, error) {
	if s.AppHealthURL == "" {
		for _, v := range []string{varAppHealthTimeout, varAppHealthInterval, varAppHealthFailureThreshold} {
			if _, set := os.LookupEnv(v); set {
				return AppHealth{}, errorf(v, "has no effect without %s; set both or neither", varAppHealthURL)
			}
		}
		return AppHealth{}, nil
	}
	u, err := url.Parse(s.AppHealthURL)
	switch {
	case err != nil:
		return AppHealth{}, errorf(varAppHealthURL, "%q is not a URL: %v", s.AppHealthURL, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return AppHealth{}, errorf(varAppHealthURL, "%q must be an http:// or https:// URL", s.AppHealthURL)
	case u.Host == "":
		return AppHealth{}, errorf(varAppHealthURL, "%q has no host", s.AppHealthURL)
	}
	a := AppHealth{
		URL:              s.AppHealthURL,
		Timeout:          s.AppHealthTimeout,
		Interval:         s.AppHealthInterval,
		FailureThreshold: s.AppHealthFailureThreshold,
	}
	switch {
	case a.Interval <= 0:
		return AppHealth{}, errorf(varAppHealthInterval, "interval (%s) must be greater than 0", a.Interval)
	case a.Timeout <= 0:
		return AppHealth{}, errorf(varAppHealthTimeout, "timeout (%s) must be greater than 0", a.Timeout)
	case a.Timeout > a.Interval:
		return AppHealth{}, errorf(varAppHealthTimeout, "timeout (%s) must not exceed %s (%s)", a.Timeout, varAppHealthInterval, a.Interval)
	case a.FailureThreshold < 1:
		return AppHealth{}, errorf(varAppHealthFailureThreshold, "threshold (%d) must be at least 1", a.FailureThreshold)
	}
	return a, nil
}

// podRef checks rule 11 for the label key and finds this sidecar's Pod.
func (l Loader) podRef(label string) (PodRef, error) {
	if errs := validation.IsQualifiedName(label); len(errs) > 0 {
		return PodRef{}, errorf(varPodLabel, "%q is not a valid label key: %s", label, strings.Join(errs, "; "))
	}
	if label == podlabel.LeaseKey {
		return PodRef{}, errorf(varPodLabel, "%q is the election label that leasehold writes next to the leader label; choose another key, such as leasehold.io/leader", label)
	}
	pod := PodRef{Name: os.Getenv("POD_NAME"), Namespace: os.Getenv("POD_NAMESPACE")}
	if pod.Name == "" {
		return PodRef{}, errorf(varPodLabel, "requires POD_NAME (from the Downward API, fieldRef metadata.name) to find the Pod to label")
	}
	if errs := validation.IsDNS1123Subdomain(pod.Name); len(errs) > 0 {
		return PodRef{}, errorf(varPodLabel, "POD_NAME %q is not a valid Pod name: %s", pod.Name, strings.Join(errs, "; "))
	}
	source := "POD_NAMESPACE"
	if pod.Namespace == "" {
		var err error
		why := "requires the Pod's namespace: POD_NAMESPACE not set"
		if pod.Namespace, source, err = l.namespaceFile(varPodLabel, why); err != nil {
			return PodRef{}, err
		}
	}
	if errs := validation.IsDNS1123Label(pod.Namespace); len(errs) > 0 {
		return PodRef{}, errorf(varPodLabel, "the Pod's namespace %q (from %s) is not a valid DNS label: %s", pod.Namespace, source, strings.Join(errs, "; "))
	}
	return pod, nil
}
