package ratelimit

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit/share"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// DefaultSyncInterval is how often a replica syncs with its store.
const DefaultSyncInterval = 100 * time.Millisecond

// Option configures a [Limiter] beyond its [Config].
type Option func(*options)

type options struct {
	clock        clock.Clock
	store        share.Store
	id           string
	syncInterval time.Duration
	log          *zap.Logger
	observe      func(EpochSummary)
	fixedSize    int
	fixedRank    int
	region       string
	unpaced      bool

	// A KeyLimiter's (perkey.go).
	keyStore   share.KeyStore
	keyShare   func() (size, rank int)
	keyObserve func(KeyEpochSummary)
	keyTop     int
}

// WithClock makes the limiter read time from c instead of the wall clock.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithStore makes the limiter one replica of a replica set kept in s, sharing the limit with
// the other replicas of the same store. Without a store the limiter is the only
// replica.
func WithStore(s share.Store) Option { return func(o *options) { o.store = s } }

// WithReplicaID names this replica in its store. Replicas are ranked by ID. The
// default is the host name, the process id and a counter.
func WithReplicaID(id string) Option { return func(o *options) { o.id = id } }

// WithSyncInterval sets how often the replica syncs with its store (default 100ms).
func WithSyncInterval(d time.Duration) Option { return func(o *options) { o.syncInterval = d } }

// WithLogger logs the replica's changes of state: store lost and back, lease
// expired, replicas joined, replica count agreed. The default logs nothing.
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithEpochObserver calls f with a summary of every epoch when it ends, from the
// limiter's timer goroutine, and with that of the epoch cut short by Close, from
// Close; the calls never overlap. f must not block.
func WithEpochObserver(f func(EpochSummary)) Option { return func(o *options) { o.observe = f } }

// WithFixedReplicas makes the limiter replica rank of a set of size replicas known
// in advance, with no store: each replica takes its rank's exact share of the
// pool. It cannot notice a replica that died or one too many.
func WithFixedReplicas(size, rank int) Option {
	return func(o *options) { o.fixedSize, o.fixedRank = size, rank }
}

// WithRegion puts the replica in region name of its limit: what it lends
// goes to the region's spare, and it takes from its own region's spare
// before any other's (see [Config.Lend]). The store is the region's,
// such as memstore's Store.Region or a redisstore with Options.Region.
func WithRegion(name string) Option { return func(o *options) { o.region = name } }

// WithoutPacing makes the limiter grant each epoch's share at its start:
// no pacing, neither Config.Pacing nor the pacing it tries and keeps with
// Config.Adaptive ([AdaptivePacing]). Pacing changes when in an epoch
// tokens come but not how many, so a simulation on a manual clock that
// moves by whole epochs (package simulate) leaves it out.
func WithoutPacing() Option { return func(o *options) { o.unpaced = true } }

var replicaSeq atomic.Uint64

func defaultReplicaID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "replica"
	}
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(replicaSeq.Add(1), 10)
}

func buildOptions(opts []Option) (options, error) {
	o := options{clock: clock.Real(), syncInterval: DefaultSyncInterval}
	for _, opt := range opts {
		opt(&o)
	}
	if o.clock == nil {
		return o, fmt.Errorf("ratelimit: WithClock(nil): %w", ErrInvalidConfig)
	}
	if o.syncInterval <= 0 {
		return o, &FieldError{Field: "SyncInterval", Value: o.syncInterval, Reason: "must be positive"}
	}
	if o.id == "" {
		o.id = defaultReplicaID()
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if o.fixedSize != 0 {
		switch {
		case o.store != nil:
			return o, fmt.Errorf("ratelimit: WithFixedReplicas and WithStore together: %w", ErrInvalidConfig)
		case o.fixedSize < 0:
			return o, &FieldError{Field: "Replicas", Value: o.fixedSize, Reason: "must be at least 1"}
		case o.fixedRank < 0 || o.fixedRank >= o.fixedSize:
			return o, &FieldError{Field: "Rank", Value: o.fixedRank, Reason: fmt.Sprintf("must be between 0 and %d (there are %d replicas)", o.fixedSize-1, o.fixedSize)}
		}
	}
	return o, nil
}
