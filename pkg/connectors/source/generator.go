package source

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// GeneratorConfig is the generator source of Numaflow's spec.source.generator.
type GeneratorConfig struct {
	// RPU messages become available at the start of every Duration.
	RPU      int64
	Duration time.Duration
	// MsgSize is the approximate payload size: the padding has MsgSize-8 random
	// bytes, as Numaflow's generator's does.
	MsgSize int
	// KeyCount spreads messages round-robin over this many keys,
	// key-<replica>-<i>; 0 gives no keys.
	KeyCount int
	// Keys, when set instead, are the messages' keys in turn, the same on
	// every replica; a key listed n times gets n turns.
	Keys []string
	// Value, when set, is the payload's value instead of the sequence number.
	Value *uint64
	// Jitter sets each message's event time up to this much before its creation.
	Jitter time.Duration
	// ValueBlob, when set, is the payload of every message as it is.
	ValueBlob []byte
	// Replica is this replica's index; keys and sequences are per replica.
	Replica int
	// Vertex names the vertex in message ids: <vertex>-<replica>-<sequence>.
	Vertex string
	// ReadTimeout is the longest a Read waits for messages to become available.
	ReadTimeout time.Duration
	// Clock is the time source (nil for the wall clock).
	Clock clock.Clock
}

// Generator is a source that makes messages at a steady rate: RPU of them at the
// start of every Duration, from its creation on. Messages not read yet wait,
// without using memory, until they are read. Each payload is JSON shaped like
// Numaflow's generator's:
//
//	{"Data":{"value":7,"padding":"cGFkZGluZw=="},"Createdts":1700000000000000000}
//
// where value counts 0, 1, 2, ... per replica (or is GeneratorConfig.Value), the
// padding is MsgSize-8 random bytes in base64 and Createdts is the creation time in
// Unix nanoseconds. Generator is safe for concurrent use.
type Generator struct {
	cfg      GeneratorConfig
	clk      clock.Clock
	start    time.Time
	padding  string
	keys     [][]string
	idPrefix string

	mu   sync.Mutex
	next uint64 // sequence number of the next message
}

var _ isb.Reader = (*Generator)(nil)

// NewGenerator returns a generator that starts now.
func NewGenerator(cfg GeneratorConfig) (*Generator, error) {
	if cfg.RPU < 1 {
		return nil, fmt.Errorf("source: generator rpu (%d) must be at least 1", cfg.RPU)
	}
	if cfg.Duration <= 0 {
		return nil, fmt.Errorf("source: generator duration (%v) must be positive", cfg.Duration)
	}
	if cfg.MsgSize < 0 || cfg.KeyCount < 0 || cfg.Jitter < 0 {
		return nil, errors.New("source: generator msgSize, keyCount and jitter must not be negative")
	}
	g := &Generator{cfg: cfg, clk: cfg.Clock}
	if g.clk == nil {
		g.clk = clock.Real()
	}
	pad := make([]byte, max(cfg.MsgSize-8, 0))
	rand.Read(pad)
	g.padding = base64.StdEncoding.EncodeToString(pad)
	for i := range cfg.KeyCount {
		g.keys = append(g.keys, []string{"key-" + strconv.Itoa(cfg.Replica) + "-" + strconv.Itoa(i)})
	}
	for _, k := range cfg.Keys {
		g.keys = append(g.keys, []string{k})
	}
	g.idPrefix = cfg.Vertex + "-" + strconv.Itoa(cfg.Replica) + "-"
	g.start = g.clk.Now()
	return g, nil
}

// due returns how many messages have become available by now since the start.
func (g *Generator) due(now time.Time) uint64 {
	if now.Before(g.start) {
		return 0 // a clock set back before the start
	}
	ticks := uint64(now.Sub(g.start)/g.cfg.Duration) + 1
	if ticks > (1<<63)/uint64(g.cfg.RPU) {
		return 1 << 63
	}
	return ticks * uint64(g.cfg.RPU)
}

// Read fills buf with the messages available now, waiting for the next tick (up to
// the read timeout) when none are.
func (g *Generator) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	deadline := g.clk.Now().Add(g.cfg.ReadTimeout)
	for {
		now := g.clk.Now()
		g.mu.Lock()
		avail := uint64(0)
		if due := g.due(now); due > g.next {
			avail = due - g.next
		}
		if avail > 0 {
			n := int(min(uint64(len(buf)), avail))
			first := g.next
			g.next += uint64(n)
			g.mu.Unlock()
			g.fill(buf[:n], first, now)
			return n, nil
		}
		g.mu.Unlock()
		next := g.start.Add(time.Duration(g.due(now)/uint64(g.cfg.RPU)) * g.cfg.Duration)
		if next.After(deadline) {
			clock.SleepUntil(ctx, g.clk, deadline)
			return 0, nil
		}
		if !clock.SleepUntil(ctx, g.clk, next) {
			return 0, nil
		}
	}
}

// fill writes the messages with sequence numbers first, first+1, ... into buf.
func (g *Generator) fill(buf []isb.ReadMessage, first uint64, now time.Time) {
	created := now.UnixNano()
	// A few chunks hold the batch's ids and payloads; messages only read them.
	// Chunks stay below the runtime's large-object size, so that a busy generator
	// does not make the runtime hand pages back and fault them in again.
	perMsg := len(g.padding) + len(g.idPrefix) + 84
	var arena []byte
	for i := range buf {
		seq := first + uint64(i)
		m := &buf[i]
		*m = isb.ReadMessage{}
		if cap(arena)-len(arena) < perMsg {
			arena = make([]byte, 0, max(arenaChunk, perMsg))
		}
		start := len(arena)
		arena = append(arena, g.idPrefix...)
		arena = strconv.AppendUint(arena, seq, 10)
		m.ID = unsafe.String(&arena[start], len(arena)-start)
		if g.cfg.ValueBlob != nil {
			m.Value = g.cfg.ValueBlob
		} else {
			value := seq
			if g.cfg.Value != nil {
				value = *g.cfg.Value
			}
			start = len(arena)
			arena = append(arena, `{"Data":{"value":`...)
			arena = strconv.AppendUint(arena, value, 10)
			if g.padding != "" {
				arena = append(arena, `,"padding":"`...)
				arena = append(arena, g.padding...)
				arena = append(arena, '"')
			}
			arena = append(arena, `},"Createdts":`...)
			arena = strconv.AppendInt(arena, created, 10)
			arena = append(arena, '}')
			m.Value = arena[start:len(arena):len(arena)]
		}
		m.EventTime = now
		if g.cfg.Jitter > 0 {
			m.EventTime = now.Add(-time.Duration(mrand.Int64N(int64(g.cfg.Jitter))))
		}
		if len(g.keys) > 0 {
			m.Keys = g.keys[seq%uint64(len(g.keys))]
		}
	}
}

// arenaChunk is the size of the generator's payload allocations.
const arenaChunk = 16 << 10

// Ack does nothing: generated messages cannot be delivered again.
func (g *Generator) Ack(context.Context, []isb.ReadMessage) error { return nil }
