package faultproxy

import (
	"sync/atomic"
	"time"
)

// dirState is the fault in force in one direction and what went through it.
type dirState struct {
	blackhole atomic.Bool
	delay     atomic.Int64 // a time.Duration; 0 for none
	forwarded atomic.Int64 // bytes written to the receiving side
	swallowed atomic.Int64 // bytes read while black-holed, never written
}

// Cut resets every open connection, on both sides, and resets every new one
// as soon as it is accepted, until [Proxy.Heal]. Bytes read but not yet
// delivered are lost. Black holes and delays stay as they are.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	links := p.takeLinks()
	p.mu.Unlock()
	for _, l := range links {
		l.end(true)
	}
}

// Blackhole makes the proxy read the bytes travelling in dir and drop them,
// on the open connections and on new ones, until [Proxy.Heal]. Connections
// stay open and new ones are accepted; a close or a reset by either side
// still goes through. Bytes already read and held by a delay are still
// delivered. A black hole in one direction leaves a fault in the other as it
// is.
func (p *Proxy) Blackhole(dir Direction) {
	for i, d := range directions {
		if dir&d != 0 {
			p.dirs[i].blackhole.Store(true)
		}
	}
}

// Delay holds back each byte read in dir from now on for d before it is
// delivered, until [Proxy.Heal] or another Delay for that direction; d <= 0
// removes the delay. Bytes keep their order: a byte is never delivered before
// one read earlier, so bytes read after a delay is shortened may wait longer
// than the new d. A black hole in dir takes precedence.
func (p *Proxy) Delay(dir Direction, d time.Duration) {
	d = max(d, 0)
	for i, dd := range directions {
		if dir&dd != 0 {
			p.dirs[i].delay.Store(int64(d))
		}
	}
}

// Heal ends every fault: the proxy accepts and forwards again, and bytes read
// from now on are delivered at once in both directions. Bytes swallowed by a
// black hole stay lost; bytes already held by a delay are delivered when it
// runs out.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
	for i := range p.dirs {
		p.dirs[i].blackhole.Store(false)
		p.dirs[i].delay.Store(0)
	}
}
