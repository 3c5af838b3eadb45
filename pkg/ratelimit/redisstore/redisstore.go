// Package redisstore is a [share.Store] in Redis: the replicas of a vertex,
// wherever they run, agree through it on who the replicas are, so that together
// they stay under the vertex's limit.
//
// # Keys
//
// A store keeps these keys per vertex, all with the hash tag of its prefix
// ({pipeline}-{vertex} or the MonoVertex's name) so that they live in one slot:
// sluice:{prefix}:heartbeats (each replica's lease deadline), :sizes (the replica
// count each reported), :members (for ranks by id), :resume, :adaptive (the
// last cut, its learnt ceiling and the pause of throttle signals), :limit (the
// live limit's last changes), :spare (spare tokens lent) and :hold (the end of
// a hold after the store lost writes, below). Every key expires after the ttl (and
// at least twice the longest lease) unless a replica keeps syncing. The first
// three are sorted sets, so that a sync costs O(log n) in the number of replicas.
// With per-key limits ([Store.TakeKeys]) it also keeps a count per message
// key, sluice:{prefix}:perkey:<key>, holding the epoch of its last grant and the
// tokens granted in it, for two seconds after that epoch. Every script names
// all the keys it touches in KEYS, and they share the hash tag, so each run is
// on one Redis Cluster slot.
//
// # Connecting
//
// [Open] connects to the Redis a [Conn] describes, one server, the master of a
// set of sentinels or a Redis Cluster (from some of its nodes' addresses), and
// fails only on a configuration Redis rejects; [New] builds a store on a client
// of the caller's, a *redis.ClusterClient as well as a *redis.Client.
//
// # Scripts
//
// Each sync is one Lua script (sync.lua), run with EVALSHA and, when Redis does
// not know it yet, EVAL: it records the heartbeat on Redis TIME with the lease
// the replica reports (its staleAfter), drops the replicas whose lease has run
// out (at most 16 per sync; more that went stale at once go over the next
// syncs, and the replicas do not agree until they are gone), and returns the
// agreement, the rank and Redis's clock, which defines the epochs of every
// replica. A replica syncs once per sync interval from a
// background goroutine, never per message.
//
// # Lost writes
//
// A Redis that fails over to a replica that had not yet got the last writes,
// or restarts without them, forgets the latest heartbeats: the replicas it
// then drops as stale may still be taking their shares, their own leases
// running from the heartbeats it lost. Each sync carries the deadline the
// store recorded for the replica at its last sync (share.Report.LeaseUntil);
// when that is still ahead and the store holds an earlier one or none, the
// store lost writes, and it holds the replica count for a lease from then: no size
// agrees and no spare tokens are lent until every lease it may have forgotten
// has run out, while the replicas keep the pool they last agreed on.
package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

var (
	//go:embed sync.lua
	syncSource string
	//go:embed leave.lua
	leaveSource string

	syncScript  = redis.NewScript(syncSource)
	leaveScript = redis.NewScript(leaveSource)
)

// Options tune a store. A replica's lease is not one of them: each replica
// reports its own staleAfter at every sync (share.Report.StaleAfter).
type Options struct {
	// TTL is how long keys outlive the last sync (and at least twice the longest
	// lease), and how long the pool of a replica that left is kept for resuming
	// (0 for share.DefaultTTL).
	TTL time.Duration
	// Region is the region of the limit whose store this is ("" for a
	// limit without regions): each region's store has keys of its own,
	// sluice:{prefix}:region:<name>:..., and the regions of a limit share
	// the spare tokens of sluice:{prefix}:spare (see share.Spare).
	Region string
}

// Store is one vertex's replica set in Redis. It is safe for concurrent use. Open one
// with [Open], which makes its own client, or build one on a client of yours with
// [New].
type Store struct {
	client  redis.Scripter
	keys    []string
	base    string // of every key: sluice:{prefix}:
	keyBase string // of the per-key counts
	opts    Options

	own       redis.UniversalClient // the client Open made; nil after New
	closeOnce sync.Once
	closeErr  error
}

var _ share.Store = (*Store)(nil)

// Open returns the store of the vertex prefix in the Redis that conn describes,
// through a client of its own, and pings Redis once within ctx to check the
// configuration. A configuration Redis rejects is an error that matches
// [ErrAuth] (credentials), [ErrTLS] (TLS handshake) or [ErrHost] (unknown host),
// and a Conn that cannot be used matches [ErrInvalidConn]; the client is closed
// then. Redis merely being away (connection refused, timeout) is no error: Open
// returns the store, whose syncs fail until Redis is back, and a limiter logs
// that at its first sync. [Store.Close] closes the client.
func Open(ctx context.Context, conn Conn, prefix string, opts Options) (*Store, error) {
	client, where, err := newClient(conn)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	s, err := New(client, prefix, opts)
	if err != nil {
		client.Close()
		return nil, err
	}
	if err := configError(client.Ping(ctx).Err()); err != nil {
		client.Close()
		return nil, fmt.Errorf("redisstore: %s: %w", where, err)
	}
	s.own = client
	return s, nil
}

// Close closes the client that [Open] made; it does nothing for a store built
// with [New], whose client belongs to its caller. Close is safe to call more than
// once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.own != nil {
			s.closeErr = s.own.Close()
		}
	})
	return s.closeErr
}

// New returns the store of the vertex prefix in the Redis of client, which stays
// the caller's to close.
func New(client redis.Scripter, prefix string, opts Options) (*Store, error) {
	if prefix == "" {
		return nil, errors.New("redisstore: empty key prefix")
	}
	if strings.ContainsAny(prefix, "{}") {
		// The prefix is the keys' hash tag: a brace would cut it short.
		return nil, fmt.Errorf("redisstore: key prefix %q has a brace", prefix)
	}
	if strings.ContainsAny(opts.Region, "{}") {
		return nil, fmt.Errorf("redisstore: region %q has a brace", opts.Region)
	}
	if opts.TTL <= 0 {
		opts.TTL = share.DefaultTTL
	}
	return newStore(client, "sluice:{"+prefix+"}:", opts), nil
}

// newStore returns the store whose keys begin with base, and, with a
// region, base + "region:<name>:", the spare key excepted.
func newStore(client redis.Scripter, base string, opts Options) *Store {
	keys := base
	if opts.Region != "" {
		keys += "region:" + opts.Region + ":"
	}
	return &Store{client: client, opts: opts, base: base, keyBase: base + "perkey",
		keys: []string{keys + "heartbeats", keys + "sizes", keys + "members", keys + "resume", keys + "adaptive", keys + "limit", base + "spare", keys + "hold"}}
}

// Limit returns the store of another limit of the same vertex, name, on the
// same client: its keys are the store's with name after the hash tag
// (sluice:{prefix}:name:heartbeats...), so they live in the vertex's slot.
// A vertex's byte limit (rateLimit.bytes) shares through its store's limit
// "bytes". Closing it does nothing; close s.
func (s *Store) Limit(name string) *Store {
	return newStore(s.client, s.base+name+":", s.opts)
}

// Keys returns the store's keys.
func (s *Store) Keys() []string { return append([]string(nil), s.keys...) }

// Sync implements [share.Store] with one script run.
func (s *Store) Sync(ctx context.Context, r share.Report) (share.View, error) {
	args := []any{r.ID, r.Replicas, leaseMillis(r), s.opts.TTL.Milliseconds(), "", 0, 0, 0, 0, "", 0, 0, 0, "", 0, 0, "", 0}
	if !r.LeaseUntil.IsZero() {
		// The deadline as the script recorded it: its time in whole ms plus the lease's.
		args[17] = r.LeaseUntil.Add(-r.Lease()).UnixMilli() + leaseMillis(r)
	}
	if sig := r.Signal; sig != nil {
		cut := 0
		if sig.Cut {
			cut = 1
		}
		pause := int64(0)
		if !sig.PauseUntil.IsZero() {
			pause = sig.PauseUntil.UnixMicro()
		}
		args[4], args[5], args[6], args[7], args[8] = sig.Epoch, cut, sig.Pool, pause, sig.Lead.Microseconds()
		args[11], args[12] = sig.Ceiling, sig.Floor
	}
	if c := r.Limit; c != nil {
		args[9], args[10] = c.Spec, c.Lead.Microseconds()
	}
	if l := r.Lend; l != nil {
		args[13], args[14], args[15], args[16] = l.Epoch, max(l.Give, 0), max(l.Want, 0), l.Region
	}
	vals, err := syncScript.Run(ctx, s.client, s.keys, args...).Slice()
	if err != nil {
		return share.View{}, fmt.Errorf("redisstore: sync: %w", err)
	}
	res, limits, tail, err := syncResult(vals)
	if err != nil {
		return share.View{}, fmt.Errorf("redisstore: sync: %w", err)
	}
	var pause, hold time.Time
	if res[9] > 0 {
		pause = time.UnixMicro(res[9])
	}
	if tail[3] > 0 {
		hold = time.UnixMilli(tail[3])
	}
	return share.View{
		Held:       hold,
		Adaptation: share.Adaptation{From: res[7], Pool: res[8], PauseUntil: pause, Ceiling: tail[0], Floor: tail[1]},
		Agreed:     res[0] == 1,
		Replicas:   int(res[1]),
		Live:       int(res[2]),
		Rank:       int(res[3]),
		Time:       time.Unix(res[4], res[5]*int64(time.Microsecond)),
		Resume:     res[6],
		Limits:     limits,
		Lent:       tail[2],
	}, nil
}

// leaseMillis is r's lease in whole milliseconds, at least 1: the store's
// deadline for it is its time then plus this.
func leaseMillis(r share.Report) int64 { return max(r.Lease().Milliseconds(), 1) }

// syncResult reads the values of the sync script: ten numbers, then the two
// last changes of the live limit as gen, spec, from, then the tail: the
// learnt ceiling and floor, the tokens lent and the end of the store's hold.
func syncResult(vals []any) (res []int64, ls []share.LiveLimit, tail []int64, err error) {
	const nums, limits, tails = 10, share.MaxLiveLimits, 4
	if len(vals) != nums+3*limits+tails {
		return nil, nil, nil, fmt.Errorf("%d values from the script, want %d", len(vals), nums+3*limits+tails)
	}
	ints := func(from, n int) ([]int64, error) {
		out := make([]int64, n)
		for i := range out {
			v, ok := vals[from+i].(int64)
			if !ok {
				return nil, fmt.Errorf("value %d from the script is %T, want an integer", from+i+1, vals[from+i])
			}
			out[i] = v
		}
		return out, nil
	}
	if res, err = ints(0, nums); err != nil {
		return nil, nil, nil, err
	}
	if tail, err = ints(len(vals)-tails, tails); err != nil {
		return nil, nil, nil, err
	}
	for i := nums; i < len(vals)-tails; i += 3 {
		gen, ok1 := vals[i].(int64)
		spec, ok2 := vals[i+1].(string)
		from, ok3 := vals[i+2].(int64)
		if !ok1 || !ok2 || !ok3 {
			return nil, nil, nil, fmt.Errorf("values %d to %d from the script are %T, %T, %T, want a live limit", i+1, i+3, vals[i], vals[i+1], vals[i+2])
		}
		if gen > 0 {
			ls = append(ls, share.LiveLimit{Gen: gen, Spec: spec, From: from})
		}
	}
	return res, ls, tail, nil
}

// Leave implements [share.Store].
func (s *Store) Leave(ctx context.Context, r share.Report) error {
	err := leaveScript.Run(ctx, s.client, s.keys, r.ID, strconv.FormatInt(max(r.Pool, 0), 10), s.opts.TTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("redisstore: leave: %w", err)
	}
	return nil
}
