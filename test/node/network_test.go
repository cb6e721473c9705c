package node_test

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The node's traffic cannot leave the machine, checked passively while it
// runs (nothing is sent anywhere): the catch-all unreachable routes for the
// node, pod and Service ranges are in place; the first rule of the mangle
// FORWARD chain jumps to LH-GUARD, which drops forwarding to or from each
// uplink; forwarding is off globally and on every uplink; and a pod's
// routing table (/proc/net/route in its own namespace) has no default
// route, only the Service and node ranges through the pods' bridge, and its
// resolv.conf names no nameserver but its own loopback (the kubelet gives
// pods no upstream nameserver).
func TestNodeNetworkIsContained(t *testing.T) {
	requireNode(t)
	routes, err := exec.Command("ip", "route", "show", "type", "unreachable").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"10.200.0.0/16", "10.244.0.0/16", "10.96.0.0/16"} {
		if !strings.Contains(string(routes), "unreachable "+r) {
			t.Errorf("no catch-all route unreachable %s:\n%s", r, routes)
		}
	}
	forward, err := exec.Command("iptables", "-w", "-t", "mangle", "-S", "FORWARD").Output()
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(forward)), "\n"); len(lines) < 2 || lines[1] != "-A FORWARD -j LH-GUARD" {
		t.Errorf("mangle FORWARD does not jump to LH-GUARD first:\n%s", forward)
	}
	guard, err := exec.Command("iptables", "-w", "-t", "mangle", "-S", "LH-GUARD").Output()
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := exec.Command("ip", "-4", "route", "show", "default").Output()
	if err != nil {
		t.Fatal(err)
	}
	var uplinks []string
	fields := strings.Fields(string(defaults))
	for i, f := range fields {
		if f == "dev" && i+1 < len(fields) {
			uplinks = append(uplinks, fields[i+1])
		}
	}
	if len(uplinks) == 0 {
		t.Fatalf("no default route to find the uplinks by:\n%s", defaults)
	}
	for _, up := range uplinks {
		for _, rule := range []string{"-A LH-GUARD -i " + up + " -j DROP", "-A LH-GUARD -o " + up + " -j DROP"} {
			if !strings.Contains(string(guard), rule) {
				t.Errorf("LH-GUARD lacks %q:\n%s", rule, guard)
			}
		}
		if v := sysctl(t, "net/ipv4/conf/"+up+"/forwarding"); v != "0" {
			t.Errorf("forwarding on %s is %s, want 0", up, v)
		}
	}
	if v := sysctl(t, "net/ipv4/ip_forward"); v != "0" {
		t.Errorf("net.ipv4.ip_forward is %s, want 0", v)
	}

	ns, _, sel := installDemo(t, "net")
	p := waitReady(t, ns, sel, 2, 2*time.Minute)[0]
	table := kubectl(t, "-n", ns, "exec", p.Name, "-c", "app", "--", "cat", "/proc/net/route")
	var dests []string
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		if f[1] == "00000000" && f[7] == "00000000" {
			t.Errorf("the pod has a default route: %s", line)
		}
		dests = append(dests, f[1]+":"+f[2])
	}
	resolv := kubectl(t, "-n", ns, "exec", p.Name, "-c", "app", "--", "cat", "/etc/resolv.conf")
	var servers []string
	for line := range strings.Lines(resolv) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" {
			servers = append(servers, f[1])
			if ip := net.ParseIP(f[1]); ip == nil || !ip.IsLoopback() {
				t.Errorf("the pod's resolv.conf names the nameserver %s, not on its own loopback:\n%s", f[1], resolv)
			}
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("FIGURES network: unreachable 10.200.0.0/16, 10.244.0.0/16, 10.96.0.0/16; LH-GUARD first in mangle FORWARD, dropping %v; ip_forward 0; a pod's routes (destination:gateway, hex) %v, no default; its nameservers %v (its own loopback)", uplinks, dests, servers)
}

func sysctl(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}
