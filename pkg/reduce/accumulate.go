package reduce

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/wal"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
	"github.com/sluiceflow/sluice/pkg/udf/accumulatorclient"
)

// HeartbeatPrefix starts the ID of the watermark messages an Accumulator
// sends a key set's function after its messages, so that a function that
// emits as the watermark moves (a sorter) can emit them. A heartbeat has no
// value, the key set's keys, and the watermark as event time; what the
// function emits with such an ID is dropped.
const HeartbeatPrefix = "sluice-watermark-"

// AccumulatorSegmentSize is the segment size of an accumulator vertex's
// log: the log holds at most about one segment more than the messages not
// yet done, since a segment is removed once every message in it is done.
const AccumulatorSegmentSize = 1 << 20

// AccumulatorConfig is what an Accumulator feeds, and where it keeps its
// state.
type AccumulatorConfig struct {
	// Timeout closes a key set's accumulator once the watermark passes the
	// latest event time of its messages by more than this.
	Timeout time.Duration
	// Client is the accumulator function's server.
	Client *accumulatorclient.Client
	// Log is the write-ahead log; nil keeps state in memory alone.
	Log *wal.Log
}

// accMsg is a message of a key set, with its place in the log.
type accMsg struct {
	m   isb.Message
	seq uint64
	seg uint64
}

// before orders messages as a key set is fed: by event time, then as read.
func (x accMsg) before(et time.Time, seq uint64) bool {
	if c := x.m.EventTime.Compare(et); c != 0 {
		return c < 0
	}
	return x.seq <= seq
}

// keySet is one key set's accumulator as the runtime sees it. Its messages
// go from held to fed to done, in the order they are fed (event time, then
// sequence), which across the key set's life is that order too: a message
// is fed once the watermark passes it, and one that comes behind the
// watermark is late.
type keySet struct {
	id       string // window.KeysID(keys)
	keys     []string
	held     []accMsg // not yet fed: sorted by event time, then sequence
	fed      []accMsg // fed and not yet done as of the last Commit, in the order fed
	start    time.Time
	lastSeen time.Time
	opened   bool
	maxSeq   uint64

	// What the function has emitted, from which fed[:done] are done once
	// the outputs are written: the IDs of fed messages it emitted, and the
	// latest watermark its outputs carried.
	emitted map[string]struct{}
	outWM   time.Time
	done    int  // fed[:done] are done, to be recorded at Commit
	logged  int  // fed[:logged] are in a done record of this batch
	touched bool // in Accumulator.touched

	heartbeats int
}

// undoneMsg is where a message held or fed, and not yet done, is.
type undoneMsg struct {
	ks  *keySet
	fed bool
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
// A fed message is done once the function has emitted an output with its ID
// (or one it drops: a heartbeat's, or tagged to drop), or an output whose
// watermark is after its event time (Numaflow's rule: data before a key
// set's outbound watermark is no longer needed), and that output is
// written. Done is kept as a prefix of the order the key set is fed in: a
// message emitted ahead of one not done waits for it. Every message is
// logged before it is acked and stays in the log until it is done or its
// key set's accumulator has closed; a restart feeds new accumulators only
// the messages not done, so what was emitted and written is not emitted
// again. Done marks go to the log before the outputs are written and are
// confirmed after: a crash between the two feeds those messages again, and
// [Accumulator.InDoubt] says how many. An Accumulator is not safe for
// concurrent use: one reader owns it; Close ends its stream.
type Accumulator struct {
	cfg       AccumulatorConfig
	sets      map[string]*keySet
	closing   map[string][]*keySet // sent CLOSE, waiting for their EOF, oldest first
	closed    []*keySet            // EOF received: to record at Commit
	touched   []*keySet            // with messages newly done: to record at Commit
	undone    map[string]undoneMsg // IDs of the messages held or fed and not done
	segUndone map[uint64]int
	seq       uint64
	batch     uint64 // number of the latest done marks logged
	pending   bool   // done marks of batch logged, not yet confirmed
	inDoubt   int
	wm        time.Time
	hasWM     bool
	dirty     bool
	late      int64
	buf       []byte
	nextID    uint64

	st       *accumulatorclient.Stream
	cancel   context.CancelFunc
	recvWG   sync.WaitGroup
	mu       sync.Mutex
	resps    []accumulatorclient.Response
	rerr     error
	received chan struct{} // signalled (never blocking) when a response or failure comes
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
		undone: map[string]undoneMsg{}, segUndone: map[uint64]int{}, received: make(chan struct{}, 1)}, nil
}

// hold adds m to its key set's held messages, in event-time order.
func (a *Accumulator) hold(m isb.Message, seq, seg uint64) {
	id := window.KeysID(m.Keys)
	ks := a.sets[id]
	if ks == nil {
		ks = &keySet{id: id, keys: m.Keys, start: m.EventTime}
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
		a.undone[m.ID] = undoneMsg{ks: ks}
	}
	a.segUndone[seg]++
}

// release forgets m: it is done, or its key set's accumulator has closed.
func (a *Accumulator) release(ks *keySet, m accMsg) {
	if lv, ok := a.undone[m.m.ID]; ok && lv.ks == ks {
		delete(a.undone, m.m.ID)
	}
	if ks.emitted != nil {
		delete(ks.emitted, m.m.ID)
	}
	a.segUndone[m.seg]--
}

// Add holds msgs for their key sets and makes them durable in the log. A
// message whose event time is before the watermark is late and dropped; a
// message whose ID is held already (delivered again) is dropped too. Once
// Add returns without error, msgs may be acked upstream.
func (a *Accumulator) Add(_ context.Context, msgs []isb.Message) (late int, err error) {
	l := a.cfg.Log
	for i := range msgs {
		m := msgs[i]
		if _, ok := a.undone[m.ID]; ok && m.ID != "" {
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
// the functions have emitted since the last call. With a log, the messages
// those outputs make done are marked in it, and synced, before Advance
// returns. Write the outputs, then Commit.
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
	out, err := a.drain()
	if err != nil {
		return nil, err
	}
	if err := a.logDone(); err != nil {
		return nil, err
	}
	return out, nil
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
			op := accumulatorclient.OpAppend
			if !ks.opened {
				op, ks.opened = accumulatorclient.OpOpen, true
			}
			return a.st.Send(accumulatorclient.Request{Op: op, Keys: ks.keys, Start: ks.start, End: end, Message: m, Watermark: wm})
		}
		n := 0
		for _, m := range ks.held {
			if !m.m.EventTime.Before(a.wm) {
				break
			}
			if err := send(m.m, prev); err != nil {
				return err
			}
			if m.m.ID != "" {
				a.undone[m.m.ID] = undoneMsg{ks: ks, fed: true}
			}
			n++
		}
		ks.fed = append(ks.fed, ks.held[:n]...)
		ks.held = slices.Delete(ks.held, 0, n)
		if ks.opened {
			ks.heartbeats++
			hb := isb.Message{Keys: ks.keys, EventTime: a.wm,
				ID: HeartbeatPrefix + strconv.FormatInt(a.wm.UnixMilli(), 10) + "-" + strconv.Itoa(ks.heartbeats)}
			if err := send(hb, a.wm); err != nil {
				return err
			}
		}
		if len(ks.held) == 0 && a.wm.After(ks.lastSeen.Add(a.cfg.Timeout)) {
			if ks.opened {
				if err := a.st.Send(accumulatorclient.Request{Op: accumulatorclient.OpClose, Keys: ks.keys, Start: ks.start, End: end}); err != nil {
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
		} else {
			a.resps = append(a.resps, r)
		}
		a.mu.Unlock()
		select {
		case a.received <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// Open is the number of key sets open.
func (a *Accumulator) Open() int { return len(a.sets) }

// Late is the number of messages dropped as late.
func (a *Accumulator) Late() int64 { return a.late }

// InDoubt is the number of messages Recover brought back whose outputs may
// have been written before the crash: they were marked done, and the mark
// not confirmed. They are fed again, so those outputs may come out twice.
func (a *Accumulator) InDoubt() int { return a.inDoubt }

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
