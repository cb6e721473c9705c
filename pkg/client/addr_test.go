package client_test

import (
	"testing"

	"github.com/leasehold/leasehold/pkg/client"
)

func TestParseAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:4040":           "http://127.0.0.1:4040",
		"localhost:4040":           "http://localhost:4040",
		"http://127.0.0.1:4040":    "http://127.0.0.1:4040",
		"http://[::1]:4040/":       "http://[::1]:4040",
		"https://127.0.0.1:4040":   "https://127.0.0.1:4040",
		"https://sidecar.example/": "https://sidecar.example",
		"http://localhost:9/":      "http://localhost:9",
		":4040":                    "http://127.0.0.1:4040", // listen addresses, as in LEASEHOLD_API_ADDR
		"0.0.0.0:4040":             "http://127.0.0.1:4040",
		"[::]:4040":                "http://[::1]:4040",
		"http://0.0.0.0:4040":      "http://127.0.0.1:4040",
	} {
		u, err := client.ParseAddr(in)
		if err != nil || u.String() != want {
			t.Errorf("ParseAddr(%q) = %v, %v; want %s", in, u, err, want)
			continue
		}
		if _, err := client.New(u.String()); err != nil {
			t.Errorf("New(ParseAddr(%q)): %v", in, err)
		}
	}
	for _, in := range []string{"", "4040", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "127.0.0.1:http", "nope",
		"ftp://127.0.0.1:4040", "http://127.0.0.1:4040/v1", "http://127.0.0.1:4040?x=1", "http://127.0.0.1:4040/?",
		"http://127.0.0.1:4040#f", "http://u:p@127.0.0.1:4040", "http://", "http://127.0.0.1:0", "https://x:99999"} {
		if u, err := client.ParseAddr(in); err == nil {
			t.Errorf("ParseAddr(%q) = %v, want an error", in, u)
		}
	}
}
