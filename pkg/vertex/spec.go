package vertex

import (
	"fmt"
	"time"

	"github.com/sluiceflow/sluice/pkg/forward"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
	"github.com/sluiceflow/sluice/pkg/reduce"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udf/accumulatorclient"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// Spec is what one replica of a vertex is built from, in Go values: its
// limits and rate limit, and the constructors of its parts. Package
// vertexconfig makes the Spec of a MonoVertex or of a pipeline vertex from a
// validated config; a Go program may write one itself.
//
// A vertex reads from Source or, without one, from each of Inputs, and writes to
// Sink or, without one, to the writers Output returns.
type Spec struct {
	// Name names the vertex in metrics, logs and /status.
	Name string
	// StoreKey keys the rate limiter's state in its store (default Name). The
	// key of a pipeline vertex includes the pipeline's name.
	StoreKey string
	// Limits are the batch size, read timeout, concurrency and rate limit.
	Limits Limits
	// Streaming overlaps reads with the mapping, writing and acking of the
	// messages before (a MonoVertex's spec.streaming).
	Streaming bool
	// Ordered is a pipeline vertex's ordered processing: each forwarder (one
	// per input partition) forwards one message at a time, in the order it
	// reads them (forward.Options.Ordered), whatever Limits.Concurrency,
	// Streaming and WithReadAhead say.
	Ordered bool

	// Source opens the vertex's source; nil for a vertex that reads Inputs.
	Source SourceFunc
	// Inputs are the partitions of the vertex's input buffer, each read by a
	// forwarder of its own. The vertex does not close them.
	Inputs []isb.Reader
	// Transformer and Map make the source transformer and the map function of
	// one forwarder, if any.
	Transformer FunctionFunc
	Map         FunctionFunc
	// Sink opens the writer of one forwarder; nil for a vertex that writes
	// Output. Fallback, if any, opens its fallback sink.
	Sink     SinkFunc
	Fallback SinkFunc
	// OnSuccess, if any, opens the sink of one forwarder where the messages
	// its sink answers ON_SUCCESS go.
	OnSuccess SinkFunc
	// Bypass, if any, routes messages by their tags straight to Sink,
	// Fallback or OnSuccess (a MonoVertex's spec.bypass).
	Bypass *forward.Bypass
	// Retry is how the forwarders retry failed sink writes; the zero value
	// retries until the sink takes the message.
	Retry forward.RetryPolicy
	// TransformRetry and MapRetry are how the forwarders retry the inputs
	// the transformer and the map fail (a result tagged udf.FailTag); the
	// zero value retries until the function takes them.
	TransformRetry, MapRetry forward.RetryPolicy
	// Output returns a writer along the vertex's edges for one forwarder; it is
	// called once per input. The vertex does not close what it returns.
	Output func() (isb.Writer, error)
	// Reduce, when set, makes the vertex a reduce: each of Inputs is read by
	// a reader that keeps its windows and writes their results to Sink or
	// Output (Transformer, Map and Fallback are not used).
	Reduce *Reduce
	// Watermark, when set, gives the vertex watermarks: a source vertex
	// computes its own, the others fetch theirs from their inputs, and
	// every vertex publishes its watermark where its output goes. Without
	// it the vertex's watermark is watermark.None.
	Watermark *Watermark
	// Scale, when set, is the vertex's scale rule (its scale block, as
	// vertexconfig.Autoscale reads it): each replica runs it every
	// DesiredInterval on what it knows of the vertex and exports the count
	// as sluice_desired_replicas.
	Scale *autoscale.Config
}

// Watermark is where a vertex's watermarks come from and go to.
type Watermark struct {
	// Source is how a source vertex computes its watermark from the event
	// times it reads (maxDelay, idleSource).
	Source watermark.Config
	// Inputs are the fetchers of the vertex's Inputs, one for each, in
	// order.
	Inputs []*watermark.Fetcher
	// Outputs returns where the vertex publishes its watermark: the store
	// and partition of each writer to a buffer partition that Output has
	// returned so far. Nil for a vertex that writes to a sink.
	Outputs func() []WatermarkOutput
	// Interval is how often the vertex fetches its inputs' watermarks and
	// publishes its own (default DefaultWatermarkInterval).
	Interval time.Duration
}

// DefaultWatermarkInterval is how often a vertex fetches and publishes its
// watermark by default.
const DefaultWatermarkInterval = 500 * time.Millisecond

// WatermarkOutput is one buffer partition a vertex writes to, where it
// publishes its watermark.
type WatermarkOutput struct {
	Store     watermark.Store
	Partition int32
	// Writer is the vertex's writer to the partition.
	Writer isb.OffsetWriter
}

// Reduce is what a reduce vertex reduces, and where its readers keep their
// windows.
type Reduce struct {
	// Strategy assigns messages to windows (window.Fixed, window.Sliding);
	// AllowedLateness keeps a window open that long past its end.
	Strategy        window.Strategy
	AllowedLateness time.Duration
	// Keyed reduces each key set of a window on its own.
	Keyed bool
	// Reducer makes the reduce function of one reader.
	Reducer ReducerFunc
	// FirstPartition is the partition of the vertex's input buffer that
	// Inputs[0] reads; the other Inputs read the partitions after it.
	FirstPartition int
	// Dir holds the write-ahead log of each reader, in Dir/partition-<i>
	// where i is the partition it reads;
	// "" keeps the windows in memory alone (no_store): a crash loses them.
	Dir string
	// Watermark, for a vertex without Spec.Watermark, is its watermark,
	// false while there is none; with Spec.Watermark, each reader's
	// watermark is its input's.
	Watermark func() (time.Time, bool)
	// Accumulator, when set, is the vertex's function in place of Reducer
	// and Strategy.
	Accumulator *Accumulator
}

// Accumulator makes each reader of a reduce vertex an accumulator
// (reduce.Accumulator): one accumulator per key set, closed once the key set
// has been idle for Timeout, in place of windows.
type Accumulator struct {
	Timeout time.Duration
	// Client makes the client of the accumulator server of one reader.
	Client func(Env) (*accumulatorclient.Client, error)
}

// ReducerFunc makes the reduce function of one reader of a reduce vertex.
type ReducerFunc func(Env) (reduce.Reducer, error)

// Limits are how much a vertex reads at once, and how fast.
type Limits struct {
	// ReadBatchSize is the most messages read at once (at least 1).
	ReadBatchSize int
	// ReadTimeout is the longest a read waits for messages (positive).
	ReadTimeout time.Duration
	// Concurrency is the most messages in flight, read and not yet acked
	// (0: ReadBatchSize). With Streaming it is how many are kept in flight;
	// without, a read takes at most the smaller of it and ReadBatchSize.
	Concurrency int
	// UDFTimeout is how long a call to one of the vertex's user-defined
	// functions may go unanswered before it is abandoned and retried
	// (0: 60s, the clients' default); a source's read has ReadTimeout on
	// top. The clients that Env.Calls is given to take it from there.
	UDFTimeout time.Duration
	// RateLimit is the vertex's rate limit; nil for none.
	RateLimit *RateLimit
}

// check reports limits a vertex cannot run with.
func (l Limits) check() error {
	switch {
	case l.ReadBatchSize < 1:
		return fmt.Errorf("read batch size (%d) must be at least 1", l.ReadBatchSize)
	case l.ReadTimeout <= 0:
		return fmt.Errorf("read timeout (%v) must be positive", l.ReadTimeout)
	case l.UDFTimeout < 0:
		return fmt.Errorf("UDF timeout (%v) must not be negative", l.UDFTimeout)
	}
	return nil
}

// concurrency returns Concurrency or its default, ReadBatchSize.
func (l Limits) concurrency() int {
	if l.Concurrency <= 0 {
		return l.ReadBatchSize
	}
	return l.Concurrency
}

// RateLimit is a vertex's rate limit: the limiter's config, where the replicas
// share it, and how the forwarders use it.
type RateLimit struct {
	// Config is the limiter's config, all replicas together.
	Config ratelimit.Config
	// Store opens where the replicas share the limit; nil keeps it in this
	// replica alone.
	Store StoreFunc
	// SyncInterval is how often the replica syncs with its store (0: the
	// limiter's default).
	SyncInterval time.Duration
	// ExcludeDropped gives back the tokens of the messages the functions drop.
	ExcludeDropped bool
	// Signals are the kinds of throttle signal (isb.Signals) that cut the
	// limit when Config.Adaptive is on; nil takes them all.
	Signals []isb.SignalKind
	// PerKey limits each message key too; nil for no per-key limit.
	PerKey *PerKey
	// Bytes limits the payload bytes per epoch too (rateLimit.bytes): the
	// byte limiter's config, all replicas together; nil for none.
	Bytes *ratelimit.Config
	// Cost is the tokens each message takes from the limit
	// (rateLimit.cost); nil for one each. An error counts the message as
	// one token and is counted in sluice_forward_error_total{stage="cost"}.
	Cost func(m *isb.Message) (int, error)
	// Groups are the shared limits the vertex joins, each a pool of its
	// own in the vertex's store: a message passes only when the vertex's
	// limit and every group's allow it.
	Groups []Group
	// Regions splits Config among the regions of the replicas
	// ([WithRegion]); nil for none.
	Regions *Regions
}

// Group is a shared limit a vertex joins (a resource group).
type Group struct {
	// Name names the group's limit in the store: sluice:{group-<name>}:...
	Name string
	// Config is the group's limit, all its members together.
	Config ratelimit.Config
}

// Regions splits a vertex's limit among regions.
type Regions struct {
	// Proportions are each region's weight.
	Proportions map[string]int
	// ReservePercentage is the part of its share an idle replica keeps when
	// it lends the rest.
	ReservePercentage int
}

// PerKey is a per-key limit beside the vertex's.
type PerKey struct {
	// Config is the per-key limiter's config.
	Config ratelimit.KeyConfig
	// Keys is which of a message's keys count.
	Keys ratelimit.KeyMode
	// MaxHeld is the most messages a forwarder holds for their keys' limit.
	MaxHeld int
}

// Store is where the replicas of a vertex share its rate limit: a store
// where they agree on who they are, or a fixed count of replicas, or neither
// (the replica alone).
type Store struct {
	// Shared is the store the replicas share. When it is a share.KeyStore
	// too, the per-key limit counts there.
	Shared share.Store
	// Replicas, without Shared, splits the limit among this many replicas,
	// this one ranked by its index ([WithReplica]), which must be below it.
	Replicas int
	// Bytes is the store of the byte limit (RateLimit.Bytes), beside
	// Shared: required with Shared and a byte limit.
	Bytes share.Store
}

// SourceFunc opens a vertex's source.
type SourceFunc func(Env) (isb.Reader, error)

// SinkFunc opens the writer of one forwarder. A writer the forwarders share
// is opened once with [Env.Shared].
type SinkFunc func(Env) (isb.Writer, error)

// FunctionFunc makes a transformer or map function for one forwarder.
type FunctionFunc func(Env) (udf.Mapper, error)

// StoreFunc opens where the replicas of a vertex share its rate limit.
type StoreFunc func(Env) (Store, error)

// withDefaults fills StoreKey.
func (s Spec) withDefaults() Spec {
	if s.StoreKey == "" {
		s.StoreKey = s.Name
	}
	return s
}
