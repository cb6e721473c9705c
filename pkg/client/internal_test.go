package client

import (
	"net/http"
	"testing"
)

// The sidecar is in the same pod: the default client never uses a proxy,
// whatever HTTP_PROXY says.
func TestNoProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy.invalid:3128")
	c, err := New("http://leasehold.invalid:4040")
	if err != nil {
		t.Fatal(err)
	}
	if tr := c.http.Transport.(*http.Transport); tr.Proxy != nil {
		t.Fatal("the transport has a Proxy function")
	}
}
