//go:build tools

// Package tools pins staticcheck for `make lint`, which builds
// honnef.co/go/tools/cmd/staticcheck from this module.
package tools

import _ "honnef.co/go/tools/cmd/staticcheck"
