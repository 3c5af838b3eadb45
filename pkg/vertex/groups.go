package vertex

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/memstore"
	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

// groupLimiter is a shared limit the vertex joined: one replica of the
// group's pool.
type groupLimiter struct {
	name    string
	l       *ratelimit.Limiter
	history *observe.History // its epochs, for /status/live
}

// syncInterval is how often each of a vertex's limiters syncs with its
// store: the configured interval, or the default once per limit (its
// messages', its bytes', each group's), so that a replica makes
// ratelimit.DefaultSyncInterval's round trips a second however many limits
// it shares.
func syncInterval(rl *RateLimit) time.Duration {
	if rl.SyncInterval > 0 {
		return rl.SyncInterval
	}
	limits := 1 + len(rl.Groups)
	if rl.Bytes != nil {
		limits++
	}
	return ratelimit.DefaultSyncInterval * time.Duration(limits)
}

// GroupStorePrefix is the store key of group name's limit: its keys are
// sluice:{group-<name>}:... in Redis.
func GroupStorePrefix(name string) string { return "group-" + name }

// localGroups are the stores of the groups of the vertices of this process
// that share no store: the vertices of one process share a group through
// them.
// (Vertices on different clocks, as tests run them, do not share one.)
var localGroups = struct {
	sync.Mutex
	m map[localGroupKey]*memstore.Store
}{m: map[localGroupKey]*memstore.Store{}}

type localGroupKey struct {
	name string
	clk  clock.Clock
}

// localGroup returns this process's store of group name.
func localGroup(name string, v *Vertex) *memstore.Store {
	localGroups.Lock()
	defer localGroups.Unlock()
	k := localGroupKey{name, v.o.clock}
	s, ok := localGroups.m[k]
	if !ok {
		s = memstore.New(v.o.clock)
		localGroups.m[k] = s
	}
	return s
}

// buildGroups makes a limiter for each group the vertex joins, a replica of
// the group in the vertex's store (or in this process without one),
// and registers its gauges with reg.
func (v *Vertex) buildGroups(reg prometheus.Registerer, rl *RateLimit) error {
	host, _ := os.Hostname()
	for _, g := range rl.Groups {
		var s share.Store
		if rl.Store != nil {
			env := v.env()
			env.StoreKey, env.Region = GroupStorePrefix(g.Name), ""
			st, err := rl.Store(env)
			if err != nil {
				return err
			}
			if st.Shared == nil {
				return fmt.Errorf("vertex %s: group %s needs a store that its members share", v.spec.Name, g.Name)
			}
			s = st.Shared
		} else {
			s = localGroup(g.Name, v)
		}
		log := v.log.Named("ratelimit.group." + g.Name)
		hist := observe.NewHistory(observe.DefaultHistory, nil)
		l, err := ratelimit.New(g.Config,
			ratelimit.WithStore(s),
			ratelimit.WithReplicaID(fmt.Sprintf("%s-%d-%s-%d", v.spec.StoreKey, v.o.replica, host, os.Getpid())),
			ratelimit.WithLogger(log),
			ratelimit.WithEpochObserver(func(s ratelimit.EpochSummary) {
				hist.Observe(s)
				log.Debug("group epoch", zap.String("group", g.Name), zap.Int64("epoch", s.Epoch),
					zap.Float64("pool", float64(s.PoolMilli)/1000), zap.Int64("share", s.Share), zap.Int64("granted", s.Granted),
					zap.Int("poolSize", s.Replicas), zap.Int("rank", s.Rank), zap.Bool("eligible", s.Eligible), zap.Int64("max", s.Max))
			}),
			ratelimit.WithClock(v.o.clock),
			ratelimit.WithSyncInterval(syncInterval(rl)))
		if err != nil {
			return fmt.Errorf("vertex %s: group %s: %w", v.spec.Name, g.Name, err)
		}
		v.groups = append(v.groups, groupLimiter{name: g.Name, l: l, history: hist})
		v.onClose(func() error { return l.Close(context.Background()) })
		observe.RegisterGroup(reg, g.Name, l.Status)
	}
	return nil
}
