//go:build tools

// Package tools pins syft for make release-snapshot, which builds
// github.com/anchore/syft/cmd/syft from this module.
package tools

import _ "github.com/anchore/syft/cmd/syft"
