package client

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// DefaultAddr is DefaultURL as HOST:PORT: the sidecar's default
// LEASEHOLD_API_ADDR.
const DefaultAddr = "127.0.0.1:4040"

// ParseAddr turns an address of the sidecar's API, as a person gives it
// (a command-line flag, LEASEHOLD_API_ADDR), into the base URL to give New.
// It accepts HOST:PORT (http), and http:// or https:// URLs with a host, an
// optional port and no path, query, fragment or user information. A port
// must be a number from 1 to 65535. An unspecified host (":4040",
// "0.0.0.0:4040", "[::]:4040": a listen address) means this host's loopback
// address of the same family. The error names addr and the rule.
func ParseAddr(addr string) (*url.URL, error) {
	const rule = "want HOST:PORT, http://HOST:PORT or https://HOST:PORT, such as " + DefaultAddr
	scheme, hostport := "http", addr
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
			u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("%q: %s", addr, rule)
		}
		if u.Port() == "" && !strings.HasSuffix(u.Host, ":") {
			return &url.URL{Scheme: u.Scheme, Host: u.Host}, nil // the scheme's port
		}
		scheme, hostport = u.Scheme, u.Host
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("%q: %s", addr, rule)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return nil, fmt.Errorf("%q: port %q must be a number from 1 to 65535", addr, port)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.Is6() {
			host = "::1"
		}
	} else if host == "" {
		host = "127.0.0.1"
	}
	return &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port)}, nil
}
