package reduce

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	udfacc "github.com/sluiceflow/sluice/pkg/udf/accumulator"
	udfreduce "github.com/sluiceflow/sluice/pkg/udf/reduce"
	"github.com/sluiceflow/sluice/pkg/wal"
	"github.com/sluiceflow/sluice/pkg/window"
)

// HeartbeatPrefix starts the ID of the watermark messages an Accumulator
// sends a key set's function after its messages, so that a function that
// emits as the watermark moves (a sorter) can emit them. A heartbeat has no
// value, the key set's keys, and the watermark as event time; what the
// function emits with such an ID is dropped.
const HeartbeatPrefix = "sluice-watermark-"

// The kinds of log record of an Accumulator.
const (
	recAccumulated byte = 'A' // a message read, with its sequence number
	recClosed      byte = 'C' // a key set's accumulator closed, up to a sequence number
)

// AccumulatorConfig is what an Accumulator feeds, and where it keeps its
// state.
type AccumulatorConfig struct {
	// Timeout closes a key set's accumulator once the watermark passes the
	// latest event time of its messages by more than this.
	Timeout time.Duration
	// Client is the accumulator function's server.
	Client *udfacc.Client
	// Log is the write-ahead log; nil keeps state in memory alone.
	Log *wal.Log
}

// accMsg is a message of a key set, with its place in the log.
type accMsg struct {
	m   isb.Message
	seq uint64
	seg uint64
}

// keySet is one key set's accumulator as the runtime sees it.
type keySet struct {
	keys       []string
	held       []accMsg // not yet fed: sorted by event time, then sequence
	fed        []accMsg // fed, kept in the log until the accumulator closes
	start      time.Time
	lastSeen   time.Time
	opened     bool
	maxSeq     uint64
	heartbeats int
}

// Accumulator keeps the key sets of one reader of an accumulator vertex and
// feeds their functions through one stream to the server: a key set's
// messages are held until the watermark passes their event time, then sent
// in event-time order with the previous watermark, followed by a heartbeat
// that carries the new one; once the watermark passes a key set's latest
// event time by more than the timeout and nothing is held, its accumulator
// is closed. What the functions emit is returned by Advance as they emit
// it, with the event times and IDs they give.
//
// Every message is logged before it is acked, and stays in the log until
// its key set's accumulator has closed and everything it emitted is
// written; a restart feeds the messages of the key sets still open to new
// accumulators, which emit again what they emitted before (with the same
// IDs when they keep their input's). An Accumulator is not safe for
// concurrent use: one reader owns it; Close ends its stream.
type Accumulator struct {
	cfg     AccumulatorConfig
	sets    map[string]*keySet
	closing map[string][]*keySet // sent CLOSE, waiting for their EOF, oldest first
	closed  []*keySet            // EOF received: to record at Commit
	live    map[string]bool      // IDs of the messages held or fed
	segLive map[uint64]int
	seq     uint64
	wm      time.Time
	hasWM   bool
	dirty   bool
	late    int64
	buf     []byte
	nextID  uint64

	st     *udfacc.Stream
	cancel context.CancelFunc
	recvWG sync.WaitGroup
	mu     sync.Mutex
	resps  []udfacc.Response
	rerr   error
}

// NewAccumulator returns an Accumulator for cfg. With a log, call
// [Accumulator.Recover] before the first Add.
func NewAccumulator(cfg AccumulatorConfig) (*Accumulator, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("reduce: AccumulatorConfig.Client is nil")
	case cfg.Timeout <= 0:
		return nil, fmt.Errorf("reduce: AccumulatorConfig.Timeout (%s) must be positive", cfg.Timeout)
	}
	return &Accumulator{cfg: cfg, sets: map[string]*keySet{}, closing: map[string][]*keySet{},
		live: map[string]bool{}, segLive: map[uint64]int{}}, nil
}

// Recover replays the log: the messages of the key sets not closed come
// back, to be fed again. It returns how many came back.
func (a *Accumulator) Recover() (int, error) {
	if a.cfg.Log == nil {
		return 0, nil
	}
	err := a.cfg.Log.Replay(func(seg uint64, rec []byte) error {
		if len(rec) == 0 {
			return errors.New("reduce: an empty log record")
		}
		r := &reader{b: rec[1:]}
		switch rec[0] {
		case recAccumulated:
			seq := r.uvarint()
			if r.err != nil {
				return fmt.Errorf("%w: a message's sequence", r.err)
			}
			m, err := decodeMessage(r.b)
			if err != nil {
				return err
			}
			a.seq = max(a.seq, seq)
			a.hold(m, seq, seg)
		case recClosed:
			keys := make([]string, r.uvarint())
			for i := range keys {
				keys[i] = r.string()
			}
			upTo := r.uvarint()
			if r.err != nil {
				return fmt.Errorf("%w: a closed key set", r.err)
			}
			id := window.KeysID(keys)
			if ks := a.sets[id]; ks != nil {
				n := 0
				for _, m := range ks.held {
					if m.seq <= upTo {
						a.release(m)
						continue
					}
					ks.held[n] = m
					n++
				}
				if ks.held = ks.held[:n]; n == 0 {
					delete(a.sets, id)
				}
			}
		case recWatermark:
			wm := time.Unix(0, r.varint())
			if r.err != nil {
				return fmt.Errorf("%w: a watermark", r.err)
			}
			a.wm, a.hasWM = wm, true
		default:
			return fmt.Errorf("reduce: a log record of unknown kind %q", rec[0])
		}
		return nil
	})
	n := 0
	for _, ks := range a.sets {
		ks.maxSeq = 0
		for _, m := range ks.held {
			ks.maxSeq = max(ks.maxSeq, m.seq)
		}
		n += len(ks.held)
	}
	return n, err
}

// hold adds m to its key set's held messages, in event-time order.
func (a *Accumulator) hold(m isb.Message, seq, seg uint64) {
	id := window.KeysID(m.Keys)
	ks := a.sets[id]
	if ks == nil {
		ks = &keySet{keys: m.Keys, start: m.EventTime}
		a.sets[id] = ks
	}
	am := accMsg{m: m, seq: seq, seg: seg}
	i, _ := slices.BinarySearchFunc(ks.held, am, func(x, y accMsg) int {
		if c := x.m.EventTime.Compare(y.m.EventTime); c != 0 {
			return c
		}
		return cmp.Compare(x.seq, y.seq)
	})
	ks.held = slices.Insert(ks.held, i, am)
	if m.EventTime.After(ks.lastSeen) {
		ks.lastSeen = m.EventTime
	}
	ks.maxSeq = max(ks.maxSeq, seq)
	if m.ID != "" {
		a.live[m.ID] = true
	}
	a.segLive[seg]++
}

// release forgets m: its key set's accumulator has closed.
func (a *Accumulator) release(m accMsg) {
	delete(a.live, m.m.ID)
	a.segLive[m.seg]--
}

// Add holds msgs for their key sets and makes them durable in the log. A
// message whose event time is before the watermark is late and dropped; a
// message whose ID is held already (delivered again) is dropped too. Once
// Add returns without error, msgs may be acked upstream.
func (a *Accumulator) Add(_ context.Context, msgs []isb.Message) (late int, err error) {
	l := a.cfg.Log
	for i := range msgs {
		m := msgs[i]
		if m.ID != "" && a.live[m.ID] {
			continue
		}
		if a.hasWM && m.EventTime.Before(a.wm) {
			late++
			continue
		}
		a.seq++
		var seg uint64
		if l != nil {
			a.buf = appendUvarint(append(a.buf[:0], recAccumulated), a.seq)
			a.buf = appendMessageBody(a.buf, &m)
			if seg, err = l.Append(a.buf); err != nil {
				return 0, err
			}
		}
		a.hold(m, a.seq, seg)
	}
	if l != nil {
		if err := l.Sync(); err != nil {
			return 0, err
		}
	}
	a.late += int64(late)
	return late, nil
}

// Advance moves the watermark to wm, feeds the key sets' functions what
// it releases, closes the key sets idle past the timeout, and returns what
// the functions have emitted since the last call. Write it, then Commit.
func (a *Accumulator) Advance(_ context.Context, wm time.Time) ([]isb.Message, error) {
	prev, moved := a.wm, !a.hasWM || wm.After(a.wm)
	if !a.hasWM {
		prev = time.Time{}
	}
	if moved {
		a.wm, a.hasWM, a.dirty = wm, true, true
	}
	if moved && len(a.sets) > 0 {
		if err := a.feed(prev); err != nil {
			return nil, err
		}
	}
	return a.drain()
}

// feed sends each key set its released messages and a heartbeat, and
// closes the idle ones, in the order of their keys.
func (a *Accumulator) feed(prev time.Time) error {
	if a.st == nil {
		sctx, cancel := context.WithCancel(context.Background())
		st, err := a.cfg.Client.Open(sctx)
		if err != nil {
			cancel()
			return err
		}
		a.st, a.cancel = st, cancel
		a.recvWG.Add(1)
		go a.receive()
	}
	ids := make([]string, 0, len(a.sets))
	for id := range a.sets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		ks := a.sets[id]
		end := ks.start.Add(a.cfg.Timeout)
		send := func(m isb.Message, wm time.Time) error {
			op := udfacc.OpAppend
			if !ks.opened {
				op, ks.opened = udfacc.OpOpen, true
			}
			return a.st.Send(udfacc.Request{Op: op, Keys: ks.keys, Start: ks.start, End: end, Message: m, Watermark: wm})
		}
		n := 0
		for _, m := range ks.held {
			if !m.m.EventTime.Before(a.wm) {
				break
			}
			if err := send(m.m, prev); err != nil {
				return err
			}
			n++
		}
		ks.fed = append(ks.fed, ks.held[:n]...)
		ks.held = slices.Delete(ks.held, 0, n)
		if len(ks.fed) > 0 {
			ks.heartbeats++
			hb := isb.Message{Keys: ks.keys, EventTime: a.wm,
				ID: HeartbeatPrefix + strconv.FormatInt(a.wm.UnixMilli(), 10) + "-" + strconv.Itoa(ks.heartbeats)}
			if err := send(hb, a.wm); err != nil {
				return err
			}
		}
		if len(ks.held) == 0 && a.wm.After(ks.lastSeen.Add(a.cfg.Timeout)) {
			if ks.opened {
				if err := a.st.Send(udfacc.Request{Op: udfacc.OpClose, Keys: ks.keys, Start: ks.start, End: end}); err != nil {
					return err
				}
				a.closing[id] = append(a.closing[id], ks)
			} else {
				a.closed = append(a.closed, ks)
			}
			delete(a.sets, id)
		}
	}
	return nil
}

// receive collects the stream's responses until it fails or ends.
func (a *Accumulator) receive() {
	defer a.recvWG.Done()
	for {
		r, err := a.st.Recv()
		a.mu.Lock()
		if err != nil {
			a.rerr = err
			a.mu.Unlock()
			return
		}
		a.resps = append(a.resps, r)
		a.mu.Unlock()
	}
}

// drain turns the responses received so far into messages to write.
func (a *Accumulator) drain() ([]isb.Message, error) {
	a.mu.Lock()
	resps, err := a.resps, a.rerr
	a.resps = nil
	a.mu.Unlock()
	var out []isb.Message
	for _, r := range resps {
		id := window.KeysID(r.Keys)
		if r.EOF {
			q := a.closing[id]
			if len(q) == 0 {
				return nil, fmt.Errorf("%w: an EOF of keys %q, which were not closed", udfacc.ErrProtocol, r.Keys)
			}
			a.closed = append(a.closed, q[0])
			if a.closing[id] = q[1:]; len(q) == 1 {
				delete(a.closing, id)
			}
			continue
		}
		m := r.Message
		if strings.HasPrefix(m.ID, HeartbeatPrefix) || slices.Contains(m.Tags, udfreduce.DropTag) {
			continue
		}
		if m.Keys == nil {
			m.Keys = r.Keys
		}
		if m.ID == "" {
			a.nextID++
			m.ID = fmt.Sprintf("%s-%d-%d", id, m.EventTime.UnixNano(), a.nextID)
		}
		out = append(out, m)
	}
	if err != nil && len(out) == 0 {
		return nil, err
	}
	return out, nil
}

// Commit records that what Advance returned is written: the key sets whose
// accumulators have closed are noted in the log, with the watermark, and
// the log's segments that hold no message of an open key set are removed.
func (a *Accumulator) Commit() error {
	l := a.cfg.Log
	if l != nil && (a.dirty || len(a.closed) > 0) {
		for _, ks := range a.closed {
			b := append(a.buf[:0], recClosed)
			b = appendUvarint(b, uint64(len(ks.keys)))
			for _, k := range ks.keys {
				b = appendString(b, k)
			}
			a.buf = appendUvarint(b, ks.maxSeq)
			if _, err := l.Append(a.buf); err != nil {
				return err
			}
		}
		if a.hasWM {
			if _, err := l.Append(appendWatermark(a.buf[:0], a.wm)); err != nil {
				return err
			}
		}
		if err := l.Sync(); err != nil {
			return err
		}
	}
	for _, ks := range a.closed {
		for _, m := range ks.fed {
			a.release(m)
		}
		for _, m := range ks.held {
			a.release(m)
		}
	}
	a.closed, a.dirty = nil, false
	if l == nil {
		return nil
	}
	segs := l.Segments()
	for i, s := range segs {
		if a.segLive[s.ID] > 0 {
			break
		}
		if i == len(segs)-1 {
			if s.Last == 0 && a.segLive[s.ID] == 0 && !a.hadMessages(s.ID) {
				break // records of closes and watermarks alone: kept until a message follows
			}
			if err := l.Rotate(); err != nil {
				return err
			}
		}
		if err := l.Remove(s.ID); err != nil {
			return err
		}
		delete(a.segLive, s.ID)
	}
	return nil
}

// hadMessages says whether segment seg took a message in this run or
// the last.
func (a *Accumulator) hadMessages(seg uint64) bool {
	_, ok := a.segLive[seg]
	return ok
}

// Open is the number of key sets open.
func (a *Accumulator) Open() int { return len(a.sets) }

// Late is the number of messages dropped as late.
func (a *Accumulator) Late() int64 { return a.late }

// Close ends the stream to the server and waits for its receiver; it is
// safe to call twice.
func (a *Accumulator) Close() error {
	if a.cancel != nil {
		a.cancel()
		a.st.Close()
	}
	a.recvWG.Wait()
	return nil
}
