// Package upgrade is the tests' stand-in for an app that upgrades a
// connection (a WebSocket, say): the long-lived exchange the forwarding
// proxy must close when the term that forwarded it ends.
package upgrade

import "bufio"

// Echo answers 101 Switching Protocols to protocol on a hijacked
// connection's brw, then writes every line it reads back after prefix,
// until a read or a write fails (the connection closed). The caller owns
// and closes the connection.
func Echo(brw *bufio.ReadWriter, protocol, prefix string) {
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + protocol + "\r\nConnection: Upgrade\r\n\r\n")
	for brw.Flush() == nil {
		line, err := brw.ReadString('\n')
		if err != nil {
			return
		}
		_, _ = brw.WriteString(prefix + line)
	}
}
