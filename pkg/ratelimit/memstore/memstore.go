// Package memstore is an in-process [share.Store]: several Limiters in one
// process share one limit through it, with the same agreement on the replicas as the Redis
// store (heartbeats, stale removal, AGREE/DISAGREE, ranks by replica ID, the
// cut and the pause of throttle signals).
//
// It serves replicas that run in one process, such as the replicas of a vertex in
// a one-process pipeline, and shows the share split and the agreement without
// Redis.
package memstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

// ErrUnavailable is returned by every call while the store is set down with
// [Store.SetAvailable].
var ErrUnavailable = errors.New("memstore: unavailable")

// Store is an in-process store of one limit's replicas. It is safe for concurrent use.
type Store struct {
	clk clock.Clock
	ttl time.Duration

	mu          sync.Mutex
	replicas    map[string]*replica
	down        bool
	resume      int64 // pool saved by the last replica to leave
	resumeUntil time.Time
	adapt       share.Adaptation // what throttle signals did
	limits      []share.LiveLimit
	holdUntil   time.Time // the end of a hold after lost writes (share.View.Held)
	// Per-key counts of the current epoch (perkey.go).
	keyEpoch  int64
	keyCounts map[string]int64
	keyCalls  int

	spare *spareBook // shared with the stores of the other regions
}

// spareBook is the spare tokens of a limit's regions, which the stores of
// its regions share (see [Store.Region]).
type spareBook struct {
	mu      sync.Mutex
	spare   share.Spare
	regions map[string]*Store
}

type replica struct {
	lease    time.Time // the last heartbeat plus the replica's staleAfter
	reported int
}

var _ share.Store = (*Store)(nil)

// New returns an empty store that reads time from clk (nil for the wall clock). It
// removes a replica whose last heartbeat is older than the StaleAfter the replica
// reported. Use SetTTL to change how long a left replica's pool is kept (default
// [share.DefaultTTL]).
func New(clk clock.Clock) *Store {
	if clk == nil {
		clk = clock.Real()
	}
	return &Store{clk: clk, ttl: share.DefaultTTL, replicas: map[string]*replica{}, spare: &spareBook{regions: map[string]*Store{}}}
}

// Region returns the store of region name of the same limit: a store of its
// own, which shares the spare tokens of s and of every other region of s
// (see [share.Spare]). The same name returns the same store.
func (s *Store) Region(name string) *Store {
	s.mu.Lock()
	ttl := s.ttl
	s.mu.Unlock()
	b := s.spare
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.regions[name]
	if !ok {
		r = &Store{clk: s.clk, ttl: ttl, replicas: map[string]*replica{}, spare: b}
		b.regions[name] = r
	}
	return r
}

// SetTTL sets how long the pool of a replica that left is kept for resuming.
func (s *Store) SetTTL(ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ttl = ttl
}

// Sync implements [share.Store].
func (s *Store) Sync(ctx context.Context, r share.Report) (share.View, error) {
	if err := ctx.Err(); err != nil {
		return share.View{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return share.View{}, ErrUnavailable
	}
	now := s.clk.Now()
	if until := r.LeaseUntil; until.After(now) {
		if rep, ok := s.replicas[r.ID]; !ok || rep.lease.Before(until) {
			// Writes were lost: see share.Report.LeaseUntil.
			if end := now.Add(r.Lease()); end.After(s.holdUntil) {
				s.holdUntil = end
			}
		}
	}
	held := now.Before(s.holdUntil)
	s.replicas[r.ID] = &replica{lease: now.Add(r.Lease()), reported: r.Replicas}
	if r.Signal != nil {
		s.adapt = s.adapt.Signaled(*r.Signal, now)
	}
	if r.Limit != nil {
		s.limits = share.ProposeLimit(s.limits, *r.Limit, now)
	}

	ids := make([]string, 0, len(s.replicas))
	lo, hi := -1, -1
	for id, rep := range s.replicas {
		if now.After(rep.lease) {
			delete(s.replicas, id)
			continue
		}
		ids = append(ids, id)
		if lo < 0 || rep.reported < lo {
			lo = rep.reported
		}
		hi = max(hi, rep.reported)
	}
	slices.Sort(ids)
	rank, _ := slices.BinarySearch(ids, r.ID)
	live := len(ids)
	agreed := lo == hi && hi == live && !held
	v := share.View{Agreed: agreed, Replicas: hi, Live: live, Rank: rank, Time: now, Adaptation: s.adapt,
		Limits: slices.Clone(s.limits)}
	if held {
		v.Held = s.holdUntil
	}
	if now.Before(s.resumeUntil) {
		v.Resume = s.resume
	}
	if r.Lend != nil && !held {
		s.spare.mu.Lock()
		v.Lent = s.spare.spare.Apply(*r.Lend, now)
		s.spare.mu.Unlock()
	}
	return v, nil
}

// Leave implements [share.Store].
func (s *Store) Leave(ctx context.Context, r share.Report) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return ErrUnavailable
	}
	delete(s.replicas, r.ID)
	if r.Pool > 0 {
		s.resume, s.resumeUntil = r.Pool, s.clk.Now().Add(s.ttl)
	}
	return nil
}

// SetAvailable makes every call fail with [ErrUnavailable] while up is false, to
// test how limiters ride out a store outage.
func (s *Store) SetAvailable(up bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = !up
}

// Flush drops all the store keeps, as a Redis that restarted empty would.
func (s *Store) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.replicas)
	s.resume, s.resumeUntil = 0, time.Time{}
	s.adapt, s.limits, s.holdUntil = share.Adaptation{}, nil, time.Time{}
	s.keyEpoch, s.keyCounts = 0, nil
}

// Members returns the IDs of the replicas in the store, sorted.
func (s *Store) Members() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.replicas))
	for id := range s.replicas {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
