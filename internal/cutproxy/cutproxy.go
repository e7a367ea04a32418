// Package cutproxy is a TCP proxy that tests cut, blackhole and restore: how they take a database
// or a broker away from the code under test, and give it back, without touching the shared server.
//
// Cut is an outage that closes: open connections are closed and new ones refused, so the code
// under test learns of it at once. Blackhole is a network partition: every connection stays open
// and new ones are accepted, but nothing is forwarded either way, so the code under test learns of
// it only from its own timeouts.
package cutproxy

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a target; Cut drops them all and refuses new ones, Blackhole
// stops forwarding while keeping them, until Restore.
type Proxy struct {
	t      testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	// gate is closed while traffic flows; Blackhole replaces it with an open one, Restore (and Cut)
	// close it.
	gate chan struct{}
	wg   sync.WaitGroup
}

// New listens on a free loopback port and forwards each connection to target (host:port); it is
// closed when t ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{t: t, target: target, conns: map[net.Conn]struct{}{}, gate: make(chan struct{})}
	close(p.gate)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.Cut(); p.wg.Wait() })
	return p
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go p.forward(c)
		}
	}()
}

// forward connects c to the target once traffic flows (at once unless blackholed) and pipes the
// pair.
func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	if !p.track(c) {
		return
	}
	<-p.open()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(up) {
		c.Close()
		return
	}
	p.wg.Add(2)
	go p.pipe(c, up)
	go p.pipe(up, c)
}

// track registers a proxied connection; false when the proxy was cut meanwhile (c is closed).
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// open is the channel that is closed while traffic flows.
func (p *Proxy) open() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gate
}

// pipe copies src to dst, holding what it read while the proxy is blackholed.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.open()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Cut closes the listener and every proxied connection (and ends a blackhole).
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flow()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// Blackhole stops forwarding without closing anything: open connections stay open and carry
// nothing either way, new connections are accepted and wait, as in a network partition that drops
// packets. Restore resumes the forwarding (what was sent meanwhile is delivered then, as TCP
// retransmissions would deliver it).
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // blackholed already
	}
}

// flow closes the gate if it is open; p.mu is held.
func (p *Proxy) flow() {
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// Restore ends a Blackhole or a Cut: traffic flows again, and after a Cut the proxy listens again
// on the same address.
func (p *Proxy) Restore() {
	p.t.Helper()
	p.mu.Lock()
	p.flow()
	listening := p.ln != nil
	p.mu.Unlock()
	if listening {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serve(ln)
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("listen again on %s: %v", p.addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }
