//go:build tools

// Package tools pins helm for `make helm-bin`, which builds
// helm.sh/helm/v3/cmd/helm from this module.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
