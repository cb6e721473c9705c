//go:build tools

// Package tools pins promtool for `make promtool-bin`, which builds
// github.com/prometheus/prometheus/cmd/promtool from this module; `make
// test` runs `promtool check rules` and `promtool test rules` on the chart's
// alerting rules with it.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
