package kubetest

import (
	"net"
	"strconv"
	"sync"
)

// Proxy is a loopback TCP proxy between one client and the apiserver that can
// be cut and healed, to simulate a network partition.
//
// Cut makes a black hole, the way a real partition behaves: connections stay
// open and new ones are accepted, but no byte crosses in either direction,
// so clients hang until their own timeouts fire instead of failing fast with
// "connection refused". Heal lets the held bytes through, as TCP
// retransmission would after a partition heals.
type Proxy struct {
	target   string
	listener net.Listener

	mu     sync.Mutex
	open   chan struct{}     // closed while traffic flows; a fresh one while cut
	conns  map[net.Conn]bool // true for the client side of a connection
	closed bool

	wg sync.WaitGroup // accept loop and every pipe goroutine
}

// NewProxy listens on a free loopback port and forwards to the apiserver.
func (c *Cluster) NewProxy() (*Proxy, error) {
	return newProxy(c.host[len("https://"):])
}

func newProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{target: target, listener: l, open: open, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// Port is the proxy's port, as a string.
func (p *Proxy) Port() string { return strconv.Itoa(p.listener.Addr().(*net.TCPAddr).Port) }

// Cut stops all traffic through the proxy until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isOpen() {
		p.open = make(chan struct{})
	}
}

// Heal lets traffic flow again, including the bytes held while cut.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isOpen() {
		close(p.open)
	}
}

// Connections is the number of client connections currently open.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, isClient := range p.conns {
		if isClient {
			n++
		}
	}
	return n
}

// Close stops the proxy, closes every connection and waits for its
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	if !p.isOpen() {
		close(p.open) // release goroutines waiting at the gate
	}
	for conn := range p.conns {
		conn.Close()
	}
	p.mu.Unlock()
	err := p.listener.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) isOpen() bool {
	select {
	case <-p.open:
		return true
	default:
		return false
	}
}

// gate returns a channel that is closed when traffic may flow.
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return // listener closed
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// serve connects one client upstream, once the gate is open, and pipes both ways.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client, true) {
		client.Close()
		return
	}
	defer p.untrack(client)
	<-p.gate()
	upstream, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(upstream, false) {
		upstream.Close()
		return
	}
	defer p.untrack(upstream)
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); p.pipe(upstream, client) }()
	go func() { defer pipes.Done(); p.pipe(client, upstream) }()
	pipes.Wait()
}

// pipe copies src to dst, holding each chunk at the gate while the proxy is cut.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: closing both ends passes it on
		}
	}
}

func (p *Proxy) track(conn net.Conn, isClient bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[conn] = isClient
	return true
}

func (p *Proxy) untrack(conn net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, conn)
	conn.Close()
}
