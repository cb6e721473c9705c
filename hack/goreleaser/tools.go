//go:build tools

// Package tools pins GoReleaser for `make release-check` and
// `make release-snapshot`, which build github.com/goreleaser/goreleaser/v2
// from this module.
package tools

import _ "github.com/goreleaser/goreleaser/v2"
