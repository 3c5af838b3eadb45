package sideinputs

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/clock"
)

// Retriever asks a side input for its current value.
type Retriever interface {
	// Retrieve returns the side input's value, and broadcast false when the
	// side input has nothing new for the vertices (no_broadcast).
	Retrieve(ctx context.Context) (value []byte, broadcast bool, err error)
}

// RetryPause is the pause between attempts while a side input has no value
// yet: the vertices that name it wait for one.
const RetryPause = time.Second

// DefaultRetrieveTimeout bounds one RetrieveSideInput call.
const DefaultRetrieveTimeout = 30 * time.Second

// ManagerDeps are what a [Manager] needs: the side inputs, a retriever for
// each, the store and the clock of the schedules.
type ManagerDeps struct {
	// SideInputs are the pipeline's, validated.
	SideInputs []config.SideInput
	// Retrievers holds a retriever per side input name.
	Retrievers map[string]Retriever
	Store      Store
	// Log receives a line for every value stored and every failure; nil: none.
	Log *zap.Logger
	// Clock times the schedules; nil is the wall clock.
	Clock clock.Clock
	// RetrieveTimeout bounds one retrieval; 0 is DefaultRetrieveTimeout.
	RetrieveTimeout time.Duration
}

// Manager asks each side input for its value at start and on its schedule,
// and puts the values into the store. Create one with [NewManager]; it runs
// once, with [Manager.Run].
type Manager struct {
	d      ManagerDeps
	scheds map[string]config.Schedule
}

// NewManager checks that every side input has a retriever and a schedule
// that parses.
func NewManager(d ManagerDeps) (*Manager, error) {
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	if d.Clock == nil {
		d.Clock = clock.Real()
	}
	if d.RetrieveTimeout <= 0 {
		d.RetrieveTimeout = DefaultRetrieveTimeout
	}
	m := &Manager{d: d, scheds: map[string]config.Schedule{}}
	for _, si := range d.SideInputs {
		if d.Retrievers[si.Name] == nil {
			return nil, fmt.Errorf("side input %s: no retriever", si.Name)
		}
		s, err := si.Trigger.ParseSchedule()
		if err != nil {
			return nil, fmt.Errorf("side input %s: trigger: %w", si.Name, err)
		}
		m.scheds[si.Name] = s
	}
	return m, nil
}

// Run runs every side input until ctx ends, and returns nil then.
func (m *Manager) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, si := range m.d.SideInputs {
		g.Go(func() error {
			m.run(gctx, si.Name)
			return nil
		})
	}
	return g.Wait()
}

// run asks side input name for a value now, again every RetryPause until
// one is stored, and then at every time its schedule matches.
func (m *Manager) run(ctx context.Context, name string) {
	clk, sched := m.d.Clock, m.scheds[name]
	log := m.d.Log.With(zap.String("sideInput", name))
	stored := false
	for {
		ok := m.once(ctx, name, log)
		if ctx.Err() != nil {
			return
		}
		stored = stored || ok
		now := clk.Now()
		wait := sched.Next(now).Sub(now)
		if !stored {
			wait = min(wait, RetryPause)
		}
		if !clock.Sleep(ctx, clk, wait) {
			return
		}
	}
}

// once retrieves name's value and stores it unless the side input says not
// to broadcast it; it reports whether a value was stored.
func (m *Manager) once(ctx context.Context, name string, log *zap.Logger) bool {
	rctx, cancel := context.WithTimeout(ctx, m.d.RetrieveTimeout)
	value, broadcast, err := m.d.Retrievers[name].Retrieve(rctx)
	cancel()
	switch {
	case ctx.Err() != nil:
		return false
	case err != nil:
		log.Warn("retrieving a side input's value failed; the vertices keep the last value", zap.Error(err))
		return false
	case !broadcast:
		log.Debug("the side input has no value to broadcast")
		return false
	}
	if err := m.d.Store.Put(ctx, name, value); err != nil {
		log.Warn("storing a side input's value failed; the vertices keep the last value", zap.Error(err))
		return false
	}
	log.Debug("side input value stored", zap.Int("bytes", len(value)))
	return true
}
