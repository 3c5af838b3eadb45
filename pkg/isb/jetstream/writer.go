package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

const (
	// RefreshInterval is how often a Writer asks the server how many
	// messages its buffer holds, for the soft full check.
	RefreshInterval = 200 * time.Millisecond
	// PublishTimeout bounds the wait for the server's acknowledgement of one
	// published message when the caller's context has no earlier deadline.
	PublishTimeout = 10 * time.Second
)

// errCodeStoreFailed is the server's error code for a message it could not
// store; a stream at its MaxMsgs with DiscardNew answers it with the
// description "maximum messages exceeded".
const errCodeStoreFailed jetstream.ErrorCode = 10077

// Writer writes messages to one buffer. It implements [isb.Writer],
// [isb.OffsetWriter] and [isb.Closer] and is safe for concurrent use.
//
// Write publishes every message of the batch without waiting, then waits for
// the server's acknowledgements (bounded by ctx and [PublishTimeout]), and
// records per message: nil when stored (a duplicate the stream dropped counts
// as stored), an error matching [isb.ErrBufferFull] when the stream refused it
// for holding MaxLength messages, another error (retryable) otherwise.
//
// Before publishing, Write checks the buffer's usage the way Numaflow does:
// when the stream holds MaxLength*UsageLimit/100 messages or more, the whole
// batch gets [isb.ErrBufferFull] and nothing is published. The count is the
// stream's, refreshed every [RefreshInterval] by a goroutine the Writer owns,
// plus the messages this Writer has stored since; other writers' messages
// show up at the next refresh. When that estimate reaches the limit, Write
// reads the stream's count again before refusing the batch.
//
// Every message carries the header Nats-Msg-Id = from + ":" + its ID, so the
// stream drops a message written again within the duplicate window (a retry
// after a lost acknowledgement) while the same ID from another vertex is
// kept. Messages with an empty ID carry no such header and are never dropped.
type Writer struct {
	name, subject, from string
	infoSubject         string // the JetStream API's stream info request
	soft                int64  // full when stored+published >= soft
	log                 *zap.Logger
	err                 error // a bad spec: every Write returns it
	errFull             error // matches isb.ErrBufferFull, names the buffer

	refreshMu sync.Mutex   // serialises refreshes
	stored    atomic.Int64 // messages in the stream at the last refresh; -1 before the first
	published atomic.Int64 // messages this writer stored since the last refresh began

	// Publishing: each unit of a batch is published with the reply subject
	// <inbox>.<slot>.<index>, and one subscription on <inbox>.> collects
	// the server's acknowledgements into the batch waiting for them. A
	// batch takes a slot, whose reply subjects are made once and reused by
	// the batches after it; a slot is taken again only once every answer to
	// its last batch came, so a late answer is never taken for another
	// message's.
	nc       *nats.Conn
	inbox    string
	sub      *nats.Subscription
	mu       sync.Mutex // guards batches, free, next and the buffers below
	batches  map[uint64]*pending
	free     []*slot     // slots no answer is awaited on
	next     uint64      // the last slot made
	enc      []byte      // reused: a publish copies its body before it returns
	hdr      nats.Header // reused likewise, with its values
	idVal    []string
	frameVal []string
	ids      []byte // reused: the dedup IDs of a batch, back to back
	idEnds   []int  // per unit, where its dedup ID ends in ids
	sizes    []int  // per message, its encoded size (frames)

	// Frames: with frameSize > 1, up to that many messages go in one
	// JetStream message. The stream counts frames; the full check turns
	// them into messages with this writer's average.
	frameSize int
	sentMsgs  atomic.Int64 // messages this writer has had stored, in all
	sentUnits atomic.Int64 // the JetStream messages that held them

	last atomic.Int64 // the largest stream sequence the server answered with

	closed    atomic.Bool
	stop      context.CancelFunc
	done      chan struct{} // closed when the refresh goroutine has returned
	closeOnce sync.Once
}

// pending is a batch of publishes waiting for the server's answers, one per
// unit: a message, or a frame of messages. Its slices are its slot's.
type pending struct {
	slot     *slot
	units    []unit
	perr     []error // per unit, a failure to publish (not awaited)
	errs     []error // per unit; set once answered
	answered []bool
	left     int
	done     chan struct{} // closed when every unit is answered
}

// slot is what one batch at a time uses: its reply subjects,
// <inbox>.<id>.<index>, and room for its units and their outcomes.
type slot struct {
	id       uint64
	replies  []string
	units    []unit
	perr     []error
	errs     []error
	answered []bool
}

// unit is one JetStream message of a batch: msgs[first : first+count], one
// message or a frame of several.
type unit struct{ first, count int }

var (
	_ isb.Writer       = (*Writer)(nil)
	_ isb.OffsetWriter = (*Writer)(nil)
	_ isb.Closer       = (*Writer)(nil)
)

// Writer returns a writer to the buffer spec describes (created with
// CreateBuffer); from is the writing vertex's name, which scopes message IDs
// for deduplication. spec must be valid: with an invalid spec every Write
// returns the validation error. Close the Writer to stop its refresh
// goroutine.
func (c *Conn) Writer(spec BufferSpec, from string) *Writer {
	w := &Writer{
		name:        spec.Name,
		subject:     subject(spec.Name),
		infoSubject: "$JS.API.STREAM.INFO." + spec.Name,
		from:        from,
		log:         c.log.With(zap.String("buffer", spec.Name)),
		errFull:     fmt.Errorf("jetstream: buffer %s: %w", spec.Name, isb.ErrBufferFull),
		done:        make(chan struct{}),
	}
	w.stored.Store(-1)
	w.frameSize = max(1, c.cfg.FrameSize)
	w.err = spec.validate()
	if w.err == nil && strings.ContainsAny(from, "\r\n") {
		w.err = fmt.Errorf("%w: buffer %s: writer name %q has a line break", ErrInvalidConfig, spec.Name, from)
	}
	if w.err == nil {
		w.nc, w.inbox, w.batches = c.nc, c.nc.NewInbox(), map[uint64]*pending{}
		w.hdr, w.idVal, w.frameVal = nats.Header{}, []string{""}, []string{""}
		w.sub, w.err = c.nc.Subscribe(w.inbox+".>", w.onAnswer)
	}
	if w.err != nil {
		close(w.done)
		w.stop = func() {}
		return w
	}
	w.soft = (int64(spec.MaxLength)*int64(spec.UsageLimit) + 99) / 100
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	go w.refreshLoop(ctx)
	return w
}

// Write publishes msgs and records what became of each in errs; see [Writer].
// It returns a non-nil error only for a bad spec, a closed Writer or a ctx
// already done. A message larger than the server's max_payload (1 MiB by
// default) fails with nats.ErrMaxPayload.
func (w *Writer) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	if w.err != nil {
		return w.err
	}
	if w.closed.Load() {
		return fmt.Errorf("jetstream: write to buffer %s: %w", w.name, ErrClosed)
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("jetstream: write to buffer %s: %w", w.name, err)
	}
	full, err := w.full(ctx)
	if err != nil || full {
		if err == nil {
			err = w.errFull
		}
		for i := range errs[:len(msgs)] {
			errs[i] = err
		}
		return nil
	}

	w.mu.Lock()
	b := w.publish(msgs, errs)
	w.mu.Unlock()
	awaitAnswers(ctx, b)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.settle(ctx, b, errs)
	return nil
}

// awaitAnswers waits until every unit of b is answered, ctx is done or
// PublishTimeout has passed.
func awaitAnswers(ctx context.Context, b *pending) {
	timeout := time.NewTimer(PublishTimeout)
	defer timeout.Stop()
	select {
	case <-b.done:
	case <-ctx.Done():
	case <-timeout.C:
	}
}

// settle records in errs what became of each message of batch b's units,
// forgets the batch, and counts what was stored. Its slot is free again once
// every unit is answered. w.mu is held.
func (w *Writer) settle(ctx context.Context, b *pending, errs []error) {
	var stored, storedUnits int64
	for u, un := range b.units {
		var err error
		switch {
		case b.perr[u] != nil:
			err = b.perr[u]
		case b.answered[u]:
			err = b.errs[u]
		default:
			cause := ctx.Err()
			if cause == nil {
				cause = fmt.Errorf("no answer in %v", PublishTimeout)
			}
			err = fmt.Errorf("jetstream: write to buffer %s: waiting for the server: %w", w.name, cause)
		}
		for i := un.first; i < un.first+un.count; i++ {
			errs[i] = err
		}
		if err == nil {
			stored += int64(un.count)
			storedUnits++
		}
	}
	delete(w.batches, b.slot.id)
	if b.left == 0 {
		sl := b.slot
		sl.units, sl.perr, sl.errs, sl.answered = b.units, b.perr, b.errs, b.answered
		w.free = append(w.free, sl)
	}
	w.published.Add(stored)
	w.sentMsgs.Add(stored)
	w.sentUnits.Add(storedUnits)
}

// maxFrameBytes bounds a frame's body, well below the server's default
// max_payload of 1 MiB.
const maxFrameBytes = 256 << 10

// frameHeader marks a JetStream message that is a frame; its value is the
// number of messages in it.
const frameHeader = "Sluice-Frame"

// publish publishes msgs, one per JetStream message or in frames, each with
// its reply subject, and returns the batch that collects the server's
// answers: its units, and per unit an error when it could not be published
// (not awaited). Messages whose ID cannot be sent get their error in errs and
// are in no unit. w.mu is held.
func (w *Writer) publish(msgs []isb.Message, errs []error) *pending {
	sl := w.slot()
	units := w.cut(msgs, errs, sl.units[:0])
	w.reply(sl, len(units))
	b := &pending{slot: sl, units: units, perr: resize(sl.perr, len(units)), errs: resize(sl.errs, len(units)),
		answered: resize(sl.answered, len(units)), left: len(units), done: make(chan struct{})}
	w.batches[sl.id] = b
	if len(units) == 0 {
		close(b.done)
	}
	ids := w.dedupIDs(msgs, units)
	m := &nats.Msg{Subject: w.subject}
	start := 0
	for u, un := range units {
		m.Reply = sl.replies[u]
		w.fill(m, msgs, un, ids[start:w.idEnds[u]])
		start = w.idEnds[u]
		if err := w.nc.PublishMsg(m); err != nil {
			b.perr[u] = w.publishErr(err)
			b.answer(u, nil)
		}
	}
	return b
}

// resize returns s with length n and every element zero, reusing its array
// when it is large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// slot returns a free slot, or a new one. w.mu is held.
func (w *Writer) slot() *slot {
	if k := len(w.free); k > 0 {
		sl := w.free[k-1]
		w.free[k-1] = nil
		w.free = w.free[:k-1]
		return sl
	}
	w.next++
	return &slot{id: w.next}
}

// reply makes sure sl has at least n reply subjects. w.mu is held.
func (w *Writer) reply(sl *slot, n int) {
	if len(sl.replies) < n {
		prefix := w.inbox + "." + strconv.FormatUint(sl.id, 10) + "."
		for i := len(sl.replies); i < n; i++ {
			sl.replies = append(sl.replies, prefix+strconv.Itoa(i))
		}
	}
}

// dedupIDs returns the Nats-Msg-Id of every unit, back to back in one
// string, and sets w.idEnds to where each ends; a unit without one has an
// empty ID. w.mu is held.
func (w *Writer) dedupIDs(msgs []isb.Message, units []unit) string {
	ids, ends := w.ids[:0], w.idEnds[:0]
	for _, un := range units {
		if un.count == 1 {
			if id := msgs[un.first].ID; id != "" {
				ids = append(append(append(ids, w.from...), ':'), id...)
			}
		} else {
			prefixed := append(append(ids, w.from...), ':')
			if withID := appendFrameID(prefixed, msgs[un.first:un.first+un.count]); len(withID) > len(prefixed) {
				ids = withID
			}
		}
		ends = append(ends, len(ids))
	}
	w.ids, w.idEnds = ids, ends
	return string(ids)
}

// cut divides msgs into units: each message alone, or with frameSize > 1
// frames of up to frameSize messages and maxFrameBytes. A message whose ID
// has a line break gets its error in errs and is in no unit; errs of the
// others are cleared. The units are appended to units; with frames, w.sizes
// holds each message's encoded size. w.mu is held.
func (w *Writer) cut(msgs []isb.Message, errs []error, units []unit) []unit {
	sizes := w.sizes[:0]
	if w.frameSize > 1 {
		for i := range msgs {
			sizes = append(sizes, encodedSize(&msgs[i]))
		}
	}
	for i := 0; i < len(msgs); {
		errs[i] = nil
		if id := msgs[i].ID; strings.ContainsAny(id, "\r\n") {
			errs[i] = fmt.Errorf("%w: buffer %s: message id %q has a line break", ErrInvalidConfig, w.name, id)
			i++
			continue
		}
		count, size := 1, 0
		if w.frameSize > 1 {
			size = sizes[i]
		}
		for count < w.frameSize && i+count < len(msgs) {
			next := i + count
			if strings.ContainsAny(msgs[next].ID, "\r\n") || size+sizes[next] > maxFrameBytes {
				break
			}
			size, count = size+sizes[next], count+1
		}
		units = append(units, unit{i, count})
		i += count
	}
	w.sizes = sizes
	return units
}

// fill sets the body and headers of m for unit un of msgs: a message alone,
// or a frame of several, with its dedup ID (none when empty). The body is
// w.enc and the headers w.hdr, reused: m is good until the next fill. w.mu
// is held.
func (w *Writer) fill(m *nats.Msg, msgs []isb.Message, un unit, dedupID string) {
	unitMsgs := msgs[un.first : un.first+un.count]
	if len(unitMsgs) == 1 {
		w.enc = appendMessage(w.enc[:0], &unitMsgs[0])
	} else {
		w.enc = appendFrame(w.enc[:0], unitMsgs, w.sizes[un.first:un.first+un.count])
	}
	m.Data, m.Header = w.enc, nil
	clear(w.hdr)
	if dedupID != "" {
		w.idVal[0] = dedupID
		w.hdr[jetstream.MsgIDHeader] = w.idVal
	}
	if len(unitMsgs) > 1 {
		w.frameVal[0] = strconv.Itoa(len(unitMsgs))
		w.hdr[frameHeader] = w.frameVal
	}
	if len(w.hdr) > 0 {
		m.Header = w.hdr
	}
}

// answer records the outcome of unit i once.
func (b *pending) answer(i int, err error) {
	if i < 0 || i >= len(b.errs) || b.answered[i] {
		return
	}
	b.errs[i], b.answered[i] = err, true
	if b.left--; b.left == 0 {
		close(b.done)
	}
}

// onAnswer takes the server's answer to one publish.
func (w *Writer) onAnswer(m *nats.Msg) {
	rest := strings.TrimPrefix(m.Subject, w.inbox+".")
	batch, index, ok := strings.Cut(rest, ".")
	id, err1 := strconv.ParseUint(batch, 10, 64)
	i, err2 := strconv.Atoi(index)
	if !ok || err1 != nil || err2 != nil {
		return
	}
	err := w.answerErr(m)
	if err == nil {
		w.noteSeq(m.Data)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.batches[id]; b != nil {
		b.answer(i, err)
	}
}

// answerErr reads the server's answer to a publish: nil when stored (or
// dropped as a duplicate), else why not.
func (w *Writer) answerErr(m *nats.Msg) error {
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		return fmt.Errorf("jetstream: write to buffer %s: %w: no stream takes its subject", w.name, ErrBufferNotFound)
	}
	if !bytes.Contains(m.Data, []byte(`"error"`)) {
		return nil
	}
	var ans struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &ans); err != nil || ans.Error == nil {
		return fmt.Errorf("jetstream: write to buffer %s: unreadable answer %q", w.name, m.Data)
	}
	return w.publishErr(ans.Error)
}

// noteSeq raises w.last to the stream sequence in ans, the server's answer
// to a message it stored (or dropped as a duplicate of the one at that
// sequence): {"stream":...,"seq":N,...}. A JSON string never holds "seq":
// unescaped, so the first one is the field.
func (w *Writer) noteSeq(ans []byte) {
	i := bytes.Index(ans, []byte(`"seq":`))
	if i < 0 {
		return
	}
	var seq int64
	for _, c := range bytes.TrimLeft(ans[i+len(`"seq":`):], " ") {
		if c < '0' || c > '9' {
			break
		}
		seq = seq*10 + int64(c-'0')
	}
	for {
		last := w.last.Load()
		if seq <= last || w.last.CompareAndSwap(last, seq) {
			return
		}
	}
}

// RaiseLastOffset makes LastOffset at least o: the last offset of the
// buffer when the writer is made, so that it covers what an earlier writer
// of the same processor (before a restart) wrote.
func (w *Writer) RaiseLastOffset(o int64) {
	for {
		last := w.last.Load()
		if o <= last || w.last.CompareAndSwap(last, o) {
			return
		}
	}
}

// LastOffset returns the largest stream sequence the server stored a
// message of this Writer at (or had stored one it dropped as a duplicate
// at), 0 before any: every message a Write reported written is at or before
// it. It implements [isb.OffsetWriter].
func (w *Writer) LastOffset() int64 { return w.last.Load() }

// publishErr classifies a failed publish: a full stream gives w.errFull.
func (w *Writer) publishErr(err error) error {
	// The server has no error code of its own for a full stream: it answers
	// "store failed" with the description "maximum messages exceeded".
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeStoreFailed &&
		strings.HasPrefix(apiErr.Description, "maximum messages exceeded") {
		return w.errFull
	}
	return fmt.Errorf("jetstream: write to buffer %s: %w", w.name, connErr(err))
}

// full reports whether the buffer is at its usage limit. The count is read
// from the server first if it never was, and again before saying full: the
// estimate only grows between refreshes, as readers' acks are not seen.
func (w *Writer) full(ctx context.Context) (bool, error) {
	if w.stored.Load() >= 0 && w.usage() < w.soft {
		return false, nil
	}
	if err := w.refresh(ctx); err != nil {
		return false, err
	}
	return w.usage() >= w.soft, nil
}

// usage estimates the messages in the buffer: the stream's count at the last
// refresh plus what this writer stored since. With frames the stream counts
// frames, each taken to hold this writer's average (a full frame before it
// has written any).
func (w *Writer) usage() int64 {
	stored := w.stored.Load()
	if w.frameSize > 1 {
		msgs, units := w.sentMsgs.Load(), w.sentUnits.Load()
		if units == 0 {
			stored *= int64(w.frameSize)
		} else {
			stored = (stored*msgs + units - 1) / units
		}
	}
	return stored + w.published.Load()
}

// refresh reads the number of messages in the stream.
func (w *Writer) refresh(ctx context.Context) error {
	w.refreshMu.Lock()
	defer w.refreshMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	// Messages stored from now on may or may not be in the answer; counting
	// them twice until the next refresh errs on the side of full.
	before := w.published.Load()
	msgs, err := w.streamMsgs(ctx)
	if err != nil {
		return bufferErr("read the usage of", w.name, err)
	}
	w.stored.Store(int64(msgs))
	w.published.Add(-before)
	return nil
}

// streamMsgs asks the server how many messages the stream holds. It reads
// only that from the stream's info, which a Writer full of a busy buffer
// asks for at every Write.
func (w *Writer) streamMsgs(ctx context.Context) (uint64, error) {
	ans, err := w.nc.RequestWithContext(ctx, w.infoSubject, nil)
	if err != nil {
		return 0, err
	}
	var info struct {
		State struct {
			Msgs uint64 `json:"messages"`
		} `json:"state"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(ans.Data, &info); err != nil {
		return 0, fmt.Errorf("unreadable stream info: %w", err)
	}
	switch {
	case info.Error == nil:
		return info.State.Msgs, nil
	case info.Error.ErrorCode == jetstream.JSErrCodeStreamNotFound:
		return 0, jetstream.ErrStreamNotFound
	}
	return 0, info.Error
}

// refreshLoop refreshes the count every RefreshInterval until ctx is done.
func (w *Writer) refreshLoop(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(RefreshInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := w.refresh(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			w.log.Warn("cannot read the buffer's usage; using the last count", zap.Error(err))
		case err == nil && failing:
			w.log.Info("reading the buffer's usage again")
		}
		failing = err != nil
	}
}

// Close stops the refresh goroutine and fails the acknowledgements still
// awaited. Writes after Close fail with [ErrClosed]. Close is safe to call
// twice.
func (w *Writer) Close() error {
	w.closeOnce.Do(func() {
		w.closed.Store(true)
		w.stop()
		<-w.done
		if w.sub != nil {
			w.sub.Unsubscribe()
		}
	})
	return nil
}
