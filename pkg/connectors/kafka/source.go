package kafka

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// TopicHeader is the header that holds the topic a message was read from, as
// Numaflow's Kafka source sets it.
const TopicHeader = "X-NF-Kafka-TopicName"

// SourceConfig configures a [Source].
type SourceConfig struct {
	Client ClientConfig
	// Topics are the topics to read (Numaflow's `topic`, split at commas).
	Topics []string
	// Group is the consumer group (Numaflow's consumerGroup); required.
	Group string
	// ReadTimeout is the longest a Read waits when nothing is buffered
	// (default 1s).
	ReadTimeout time.Duration
	// MaxBuffered is how many records are fetched ahead of Read before
	// fetching pauses (default 10,000).
	MaxBuffered int
	// RevokeWait is how long a rebalance that takes partitions away waits for
	// the messages already read from them to be acked, so that their offsets
	// are committed before the new owner starts (default 5s; negative: no
	// wait). Messages acked later are read again by the new owner.
	RevokeWait time.Duration
}

// Source reads a set of topics as a member of a consumer group: an
// [isb.Reader] whose offsets are committed only once the messages are acked.
// See the package documentation for the delivery guarantee and the fairness
// of Read. Source is safe for concurrent use.
type Source struct {
	cfg   SourceConfig
	log   *zap.Logger
	cl    *kgo.Client
	adm   *kadm.Client
	watch *connWatch
	reset string // "earliest" or "latest"
	every time.Duration

	ctx       context.Context // done once Close starts
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	commitSig chan struct{}
	closeOnce sync.Once
	closeErr  error

	// commitMu orders the commits: the background ones, a revoke's, Close's.
	commitMu sync.Mutex

	mu       sync.Mutex
	parts    map[partKey]*partition
	ready    []*partition  // partitions with records to read, in round-robin order
	rr       int           // the next partition of ready to read from
	buffered int           // records fetched and not read
	avail    chan struct{} // closed when records arrive after buffered was 0
	room     chan struct{} // closed when buffered drops below MaxBuffered
	dirty    []*partition  // partitions whose commit point moved
	pollErr  error         // the last fetch error, for the next empty Read
	closing  bool          // Close started: Read returns ErrClosed
	closed   bool          // Close committed: Ack returns ErrClosed
	gone     func([]int32) // told of partitions revoked or lost
}

var (
	_ isb.Reader          = (*Source)(nil)
	_ isb.Closer          = (*Source)(nil)
	_ isb.PartitionReader = (*Source)(nil)
)

// Partition returns the partition of the record m came from. It
// implements [isb.PartitionReader].
func (s *Source) Partition(m *isb.ReadMessage) int32 {
	if r, ok := m.Handle.(*kgo.Record); ok {
		return r.Partition
	}
	return 0
}

// OnPartitionsGone makes the source call f with the partitions revoked or
// lost in a rebalance. It implements [isb.PartitionReader].
func (s *Source) OnPartitionsGone(f func(partitions []int32)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = f
}

// partitionsGone tells of the partitions in m taken away.
func (s *Source) partitionsGone(m map[string][]int32) {
	s.mu.Lock()
	f := s.gone
	s.mu.Unlock()
	if f == nil {
		return
	}
	var parts []int32
	for _, ps := range m {
		parts = append(parts, ps...)
	}
	if len(parts) > 0 {
		f(parts)
	}
}

// NewSource returns a source that joins cfg.Group and reads cfg.Topics. It
// does not wait for the brokers: connecting, joining the group and fetching
// go on in the background, until Close, and their errors come back from Read.
// The background work keeps ctx's values but not its cancellation: Close
// ends it.
func NewSource(ctx context.Context, cfg SourceConfig) (*Source, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	opts, watch, err := cfg.Client.options(RoleSource)
	if err != nil {
		return nil, err
	}
	s := &Source{cfg: cfg, log: cfg.Client.Logger, watch: watch, parts: map[partKey]*partition{},
		avail: make(chan struct{}), room: make(chan struct{}), commitSig: make(chan struct{}, 1)}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.cfg.ReadTimeout <= 0 {
		s.cfg.ReadTimeout = time.Second
	}
	if s.cfg.MaxBuffered <= 0 {
		s.cfg.MaxBuffered = 10000
	}
	if s.cfg.RevokeWait == 0 {
		s.cfg.RevokeWait = 5 * time.Second
	}
	opts = append(opts, s.consumerOptions()...)
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if s.cl, err = kgo.NewClient(opts...); err != nil {
		s.cancel()
		return nil, configErr(RoleSource, "client", "", "cannot be made: "+err.Error())
	}
	s.adm = kadm.NewClient(s.cl)
	s.wg.Add(2)
	go s.poll()
	go s.commitLoop()
	return s, nil
}

func (cfg *SourceConfig) check() error {
	if strings.TrimSpace(cfg.Group) == "" {
		return configErr(RoleSource, "consumerGroup", "", "is required")
	}
	if len(cfg.Topics) == 0 {
		return configErr(RoleSource, "topic", "", "is required")
	}
	for _, t := range cfg.Topics {
		if strings.TrimSpace(t) == "" {
			return configErr(RoleSource, "topic", strings.Join(cfg.Topics, ","), "must not hold an empty topic name")
		}
	}
	return cfg.Client.Properties.Check(RoleSource)
}

// Read fills buf with at most len(buf) messages, taken in turn from each
// partition with records fetched, and returns as soon as it has any. With
// none fetched it waits up to the read timeout, or until ctx is done, and
// returns 0: with a nil error, or with the last error of fetching or of
// connecting (an unreachable broker, a failed authentication), each once.
func (s *Source) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	var timer *time.Timer
	for {
		n, avail, err := s.take(buf)
		if n > 0 {
			for i := range buf[:n] {
				buf[i].Message = message(buf[i].Handle.(*kgo.Record))
			}
			return n, nil
		}
		if err != nil {
			return 0, err
		}
		if timer == nil {
			timer = time.NewTimer(s.cfg.ReadTimeout)
			defer timer.Stop()
		}
		select {
		case <-avail:
		case <-timer.C:
			return 0, s.takePollErr()
		case <-ctx.Done():
			return 0, nil
		}
	}
}

// take moves at most len(buf) records, round robin over the partitions, from
// fetched to read, and sets each one as its message's handle. With none to
// take it returns the channel closed when some arrive.
func (s *Source) take(buf []isb.ReadMessage) (int, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return 0, nil, ErrClosed
	}
	if s.buffered == 0 {
		return 0, s.avail, nil
	}
	n := 0
	for n < len(buf) && len(s.ready) > 0 {
		if s.rr >= len(s.ready) {
			s.rr = 0
		}
		p := s.ready[s.rr]
		buf[n] = isb.ReadMessage{Handle: p.read()}
		n++
		if p.queued() == 0 {
			p.inReady = false
			s.ready = append(s.ready[:s.rr], s.ready[s.rr+1:]...)
		} else {
			s.rr++
		}
	}
	s.unbuffer(n)
	return n, nil, nil
}

// unbuffer counts n records out of the buffer, and wakes the poller when the
// buffer has room again. s.mu is held.
func (s *Source) unbuffer(n int) {
	full := s.buffered >= s.cfg.MaxBuffered
	s.buffered -= n
	if full && s.buffered < s.cfg.MaxBuffered {
		close(s.room)
		s.room = make(chan struct{})
	}
}

func (s *Source) takePollErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.pollErr
	s.pollErr = nil
	if err == nil {
		err = s.watch.take()
	}
	return err
}

// message is the message of a record: its key as the only key, its headers,
// the topic in TopicHeader, its timestamp as the event time.
func message(r *kgo.Record) isb.Message {
	m := isb.Message{
		ID:        r.Topic + ":" + strconv.FormatInt(int64(r.Partition), 10) + ":" + strconv.FormatInt(r.Offset, 10),
		Value:     r.Value,
		EventTime: r.Timestamp,
		Headers:   make(map[string]string, len(r.Headers)+1),
	}
	if len(r.Key) > 0 {
		m.Keys = []string{string(r.Key)}
	}
	for _, h := range r.Headers {
		m.Headers[h.Key] = string(h.Value)
	}
	m.Headers[TopicHeader] = r.Topic
	return m
}

// poll fetches records into the partitions' queues until Close, pausing while
// MaxBuffered records wait to be read.
func (s *Source) poll() {
	defer s.wg.Done()
	backoff := time.Duration(0)
	for {
		if !s.waitRoom() {
			return
		}
		fetches := s.cl.PollFetches(s.ctx)
		n := s.add(fetches)
		s.cl.AllowRebalance()
		if s.ctx.Err() != nil {
			return
		}
		err := fetchErr(fetches)
		if err == nil || n > 0 {
			backoff = 0
			continue
		}
		s.mu.Lock()
		s.pollErr = err
		s.mu.Unlock()
		s.log.Debug("kafka fetch failed", zap.Error(err))
		backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
		if !sleep(s.ctx, backoff) {
			return
		}
	}
}

// waitRoom waits until fewer than MaxBuffered records are buffered, and
// reports false when the source is closing.
func (s *Source) waitRoom() bool {
	for {
		s.mu.Lock()
		room, full := s.room, s.buffered >= s.cfg.MaxBuffered
		s.mu.Unlock()
		if !full {
			return s.ctx.Err() == nil
		}
		select {
		case <-room:
		case <-s.ctx.Done():
			return false
		}
	}
}

// add queues the fetched records of the partitions this source owns and
// returns how many it queued.
func (s *Source) add(fetches kgo.Fetches) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) == 0 {
			return
		}
		p := s.parts[partKey{fp.Topic, fp.Partition}]
		if p == nil || p.revoking {
			return
		}
		n += p.queue(fp.Records)
		if !p.inReady && p.queued() > 0 {
			p.inReady = true
			s.ready = append(s.ready, p)
		}
	})
	if s.buffered == 0 && n > 0 {
		close(s.avail)
		s.avail = make(chan struct{})
	}
	s.buffered += n
	return n
}

// fetchErr returns the first error of fetches that is not the source closing.
func fetchErr(fetches kgo.Fetches) error {
	for _, fe := range fetches.Errors() {
		if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, kgo.ErrClientClosed) {
			continue
		}
		if fe.Topic == "" {
			return fe.Err
		}
		return errors.New("kafka source: fetching " + fe.Topic + "[" + strconv.Itoa(int(fe.Partition)) + "]: " + fe.Err.Error())
	}
	return nil
}

// sleep waits d or until ctx is done, and reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Ping reports whether a broker answers (with the TLS and SASL configured).
func (s *Source) Ping(ctx context.Context) error { return ping(ctx, s.cl, s.watch) }

// ping pings a broker and explains a failure with the last failure to
// connect.
func ping(ctx context.Context, cl *kgo.Client, w *connWatch) error {
	err := cl.Ping(ctx)
	if err == nil {
		return nil
	}
	if last := w.last(); last != nil {
		return last
	}
	return err
}

// Close stops fetching, commits the offsets of what was acked, leaves the
// group (its partitions go to the other members, from those offsets) and
// closes the connections. Messages read and not acked are read again by the
// group. Read and Ack return ErrClosed afterwards. Close is safe to call
// twice.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		close(s.avail) // wakes the waiting Reads, which see closing
		s.avail = make(chan struct{})
		s.mu.Unlock()
		s.cancel()
		s.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
		s.closeErr = s.commitAll(ctx)
		cancel()
		s.cl.CloseAllowingRebalance()
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
	})
	return s.closeErr
}
