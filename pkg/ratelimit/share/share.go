// Package share is how the replicas of a rate-limited vertex share its
// limit: they agree on each epoch's token pool through a store. It holds the
// [Store] a replica syncs with, what the replica reports ([Report]) and
// learns ([View]) at each sync, and the rules every store applies the same
// way: the lease of a replica, the cut and the pause of a throttle signal
// ([Adaptation.Signaled]), and the epoch a live change of the limit applies
// from ([ProposeLimit]). Per-key limits count in a [KeyStore].
//
// Package ratelimit's Limiter is the replica's side; memstore and redisstore
// are stores. Epochs are whole seconds of the store's clock.
package share

import (
	"context"
	"time"
)

// epochNanos is the length of an epoch.
const epochNanos = int64(time.Second)

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// DefaultStaleAfter is the default lease of a replica with its store.
const DefaultStaleAfter = 2 * time.Second

// Lease returns the lease a StaleAfter of d gives: d, or DefaultStaleAfter
// for 0 (or less).
func Lease(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultStaleAfter
	}
	return d
}

// Store is where the replicas of one vertex agree on who the replicas are. Tokens are
// never counted in the store: each replica computes its own share of the pool from
// the agreed replica count and its rank, so the store is called once per sync interval
// from a background goroutine, never per Acquire.
//
// Implementations are safe for concurrent use and keep one replica set per key; the
// in-process one is [memstore], the distributed one is backed by Redis.
type Store interface {
	// Sync records a heartbeat for r.ID with the replica count it reports, removes
	// every replica whose last heartbeat is older than the StaleAfter that replica
	// reported with it, and returns the replicas as the store sees them now. A replica
	// unknown to the store is registered by its first Sync.
	Sync(ctx context.Context, r Report) (View, error)
	// Leave removes the replica r.ID at once, on graceful shutdown, and keeps
	// r.Pool (when positive) for a replica that resumes the ramp within the
	// store's ttl.
	Leave(ctx context.Context, r Report) error
}

// DefaultTTL is how long a store keeps the pool of a replica that left, for a
// replica that resumes the ramp, and its keys after the last sync.
const DefaultTTL = 180 * time.Second

// Report is what a replica tells the store at each sync.
type Report struct {
	// ID identifies the replica; ranks are its order among the live IDs.
	ID string
	// Replicas is the replica count the replica reports: 0 at its first sync,
	// then the live count or agreed count it last learned.
	Replicas int
	// StaleAfter is the replica's lease (ratelimit.Config.StaleAfter; 0 for
	// [DefaultStaleAfter]): the store drops the replica once its last heartbeat is
	// older than this, and the replica stops trusting its last view no later than
	// that. Each replica's own lease applies to it, so the two cannot disagree.
	StaleAfter time.Duration
	// Pool is the replica's pool P in milli-tokens, given on Leave.
	Pool int64
	// Signal is the throttle signal the replica got since its last sync, if
	// any, for the store to apply with [Adaptation.Signaled].
	Signal *Signal
	// Limit is a change of the live limit the replica proposes, if any, for
	// the store to apply with [ProposeLimit]: its config at registration,
	// then each ratelimit.Limiter.Update.
	Limit *LimitChange
	// Lend is the replica's exchange of spare tokens, if any: what it gives
	// to the pool's spare and asks of it (see [Spare]).
	Lend *Lend
	// LeaseUntil is the lease deadline the store recorded for the replica at
	// its last sync (that sync's View.Time plus its lease), or zero. A store
	// that no longer holds it while it is still ahead lost writes, and may
	// have forgotten the others' last heartbeats too: it holds the pool
	// (View.Held) until any lease it can have forgotten has run out.
	LeaseUntil time.Time
}

// Lend is a replica's exchange of spare tokens with the others that share
// its store's spare: the other replicas of its limit, and those of the
// other regions of the same limit.
type Lend struct {
	// Epoch is the epoch of the tokens, by the replica's store clock. A
	// store whose clock is in another epoch takes none of Give and grants
	// none of Want: tokens are of one epoch only.
	Epoch int64
	// Give is the tokens of Epoch the replica no longer grants itself, for
	// the others to take.
	Give int64
	// Want is the most tokens of Epoch the replica asks for.
	Want int64
	// Region is the replica's region ("" without regions): what it gives
	// goes to its region's spare, and it takes from its own region's spare
	// before any other's.
	Region string
}

// Lease returns the replica's lease: StaleAfter, or DefaultStaleAfter when
// it is 0.
func (r Report) Lease() time.Duration { return Lease(r.StaleAfter) }

// Signal is a throttle signal as a replica reports it to its store: what the
// vertex protects said it is rate limited (see ratelimit.Limiter.Signal).
type Signal struct {
	// Epoch is the epoch the signal came in, by the replica's store clock.
	Epoch int64
	// Cut asks for the pool to be cut to Pool (milli-tokens) when no cut has
	// taken effect since Epoch began.
	Cut  bool
	Pool int64
	// Ceiling is the pool P (milli-tokens) of the epoch the signal came in:
	// the rate the downstream refused, which a cut keeps as the learnt
	// ceiling; 0 for none.
	Ceiling int64
	// Floor is the pool P (milli-tokens) of the epoch before, when that
	// epoch passed without a signal: a rate the downstream took; 0 when
	// unknown.
	Floor int64
	// PauseUntil is when the replicas may take tokens again, on the store
	// clock (the Retry-After); zero for no pause.
	PauseUntil time.Time
	// Lead is how long the replicas need to learn of a cut: it takes effect
	// from the first epoch that begins at least Lead after the store applies
	// it, so that every replica uses the same pool in it.
	Lead time.Duration
}

// Adaptation is what throttle signals did to a vertex's pool, as its store
// keeps it: the last cut and the pause. The zero value is no cut and no
// pause.
type Adaptation struct {
	// From is the epoch from which the last cut applies, and Pool the pool P
	// (milli-tokens) it set then; From is 0 before the first cut.
	From int64
	Pool int64
	// PauseUntil is the latest end of a pause asked for, on the store clock.
	PauseUntil time.Time
	// Ceiling is the learnt ceiling of the last cut: the pool P
	// (milli-tokens) at which its signal came ([Signal.Ceiling]); 0 for none.
	// Every replica climbs back towards it from From the same way.
	Ceiling int64
	// Floor is the rate below the ceiling known to pass ([Signal.Floor]);
	// 0 for none.
	Floor int64
}

// Signaled returns a after signal s, applied by a store at its time now: the
// pause is extended to s.PauseUntil, and a cut is made when s asks for one and
// came in an epoch in which the last cut had already taken effect: at most
// one cut per epoch, and none for signals that traffic sent before the last
// cut caused. A cut keeps s.Ceiling and s.Floor as the learnt ceiling and
// the rate known to pass below it. A cut takes effect from the first epoch that begins at least
// s.Lead after now, and after s's epoch.
func (a Adaptation) Signaled(s Signal, now time.Time) Adaptation {
	if s.PauseUntil.After(a.PauseUntil) {
		a.PauseUntil = s.PauseUntil
	}
	if s.Cut && s.Epoch >= a.From {
		a.From = max(floorDiv(now.Add(s.Lead).UnixNano(), epochNanos)+1, s.Epoch+1)
		a.Pool = s.Pool
		a.Ceiling, a.Floor = s.Ceiling, s.Floor
	}
	return a
}

// View is the replicas as the store saw them at one sync.
type View struct {
	// Agreed is true when every live replica reported the same replica count
	// and that count equals the live count.
	Agreed bool
	// Replicas is the agreed replica count when Agreed, otherwise the largest
	// count reported.
	Replicas int
	// Live is the number of live replicas, the caller included.
	Live int
	// Rank is the caller's 0-based rank by ID among the live replicas.
	Rank int
	// Time is the store's clock at the sync; epochs are whole seconds of it.
	Time time.Time
	// Resume is the pool P (milli-tokens) a replica saved when it left within the
	// store's ttl, or 0.
	Resume int64
	// Adaptation is the vertex's last cut and pause, by throttle signals.
	Adaptation Adaptation
	// Limits is the last changes of the live limit, oldest first, at most
	// [MaxLiveLimits].
	Limits []LiveLimit
	// Lent is the tokens of Report.Lend.Epoch the store granted the replica
	// from the spare, at most its Want.
	Lent int64
	// Held is the end of the store's hold after it lost writes (see
	// Report.LeaseUntil), on the store clock, or zero: until then no pool
	// size agrees and no spare tokens are lent, so that no replica takes a
	// share a replica the store forgot may still be taking.
	Held time.Time
}

// Spare is the spare tokens of one epoch as a store keeps them, by region
// ("" without regions), and how every store applies a [Lend]: tokens
// given go to the giver's region; tokens asked for come from the asker's
// own region first, then from the other regions, the fullest first (the
// first by name among equals). A lend of an epoch other than the store's
// gives and takes nothing, and the spare of an epoch is dropped when the
// next one's first lend comes. Tokens are never granted twice: what a
// store grants it takes out of the spare.
type Spare struct {
	Epoch    int64
	ByRegion map[string]int64
}

// Apply applies l at the store's time now and returns the tokens granted.
func (s *Spare) Apply(l Lend, now time.Time) int64 {
	e := floorDiv(now.UnixNano(), epochNanos)
	if l.Epoch != e {
		return 0
	}
	if s.Epoch != e || s.ByRegion == nil {
		s.Epoch, s.ByRegion = e, map[string]int64{}
	}
	if l.Give > 0 {
		s.ByRegion[l.Region] += l.Give
	}
	want := max(l.Want, 0)
	got := min(want, s.ByRegion[l.Region])
	s.ByRegion[l.Region] -= got
	for want > got {
		best, most := "", int64(0)
		for r, n := range s.ByRegion {
			if r != l.Region && (n > most || (n == most && n > 0 && r < best)) {
				best, most = r, n
			}
		}
		if most == 0 {
			break
		}
		g := min(want-got, most)
		s.ByRegion[best] -= g
		got += g
	}
	return got
}

// LimitChange is a change of the live limit a replica reports to its store.
type LimitChange struct {
	// Spec is the live settings, encoded: equal settings encode equally.
	Spec string
	// Lead is how long the replicas need to learn of the change: it applies
	// from the first epoch that begins at least Lead after the store takes it.
	Lead time.Duration
}

// LiveLimit is one change of the live limit as a store keeps it.
type LiveLimit struct {
	// Gen numbers the changes of the store, from 1.
	Gen int64
	// Spec is the live settings ([LimitChange.Spec]).
	Spec string
	// From is the epoch from which the change applies.
	From int64
}

// MaxLiveLimits is how many of the last changes a store keeps and returns:
// a replica that learns two at one sync applies each at its epoch.
const MaxLiveLimits = 2

// ProposeLimit returns a store's changes, oldest first, after a replica
// proposed c at the store's time now: unchanged when c's settings are those
// of the last change, else with a new change that applies from the first
// epoch beginning at least c.Lead after now, and after the last change's
// epoch. At most [MaxLiveLimits] are kept.
func ProposeLimit(limits []LiveLimit, c LimitChange, now time.Time) []LiveLimit {
	var last LiveLimit
	if n := len(limits); n > 0 {
		last = limits[n-1]
		if last.Spec == c.Spec {
			return limits
		}
	}
	from := max(floorDiv(now.Add(c.Lead).UnixNano(), epochNanos)+1, last.From+1)
	limits = append(limits, LiveLimit{Gen: last.Gen + 1, Spec: c.Spec, From: from})
	if n := len(limits); n > MaxLiveLimits {
		limits = append([]LiveLimit(nil), limits[n-MaxLiveLimits:]...)
	}
	return limits
}

// KeyRequest asks for Want tokens of Key.
type KeyRequest struct {
	Key  string
	Want int
}

// KeyStore counts tokens per key per epoch for every replica of a vertex.
// Implementations are safe for concurrent use; the Redis one is
// redisstore.Store.
type KeyStore interface {
	// TakeKeys takes, for each of reqs (whose keys are distinct), up to Want
	// tokens of its key in the store's current epoch, so that no key gets
	// more than max in one epoch over all callers, and writes the grants to
	// granted (as long as reqs). It returns the store's time, whose whole
	// seconds are the epoch of the grants. One call is one round trip.
	TakeKeys(ctx context.Context, max int64, reqs []KeyRequest, granted []int) (time.Time, error)
}
