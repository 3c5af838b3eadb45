package reload

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// DefaultInterval is how often `vertex run` looks at its config file for a
// change. A ConfigMap update reaches the file within the kubelet's sync
// period, a minute or so, so a second adds little to it.
const DefaultInterval = time.Second

// Deps are what a [Watcher] needs besides the file and the running config.
type Deps struct {
	// Interval is how often the file is looked at; 0 looks only when forced.
	Interval time.Duration
	// Clock times Interval; nil is the wall clock.
	Clock clock.Clock
	// Log receives one line for each change applied or refused; nil: none.
	Log *zap.Logger
	// Registerer, when set, gets sluice_config_reloads_total, labelled with
	// Vertex (the MonoVertex, the pipeline vertex that runs alone, or the
	// pipeline when all its vertices run in the process) and Replica.
	Registerer prometheus.Registerer
	Vertex     string
	Replica    int
}

// Watcher applies the live changes of a running replica's config file: see
// the package doc. Create it with [New] when the config is loaded, and call
// [Watcher.Run] once what applies a change runs.
type Watcher struct {
	path     string
	interval time.Duration
	clock    clock.Clock
	log      *zap.Logger
	reloads  *prometheus.CounterVec // by result: applied, refused; nil without a Registerer

	// Owned by Run.
	running *config.File
	seen    []byte // the contents last looked at
	apply   func(*config.File) error
}

// New returns a Watcher of the config file at path, whose replica runs
// running, the config loaded from it. It reads the file again at once, as the
// contents running came from.
func New(path string, running *config.File, d Deps) *Watcher {
	if d.Clock == nil {
		d.Clock = clock.Real()
	}
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	seen, _ := os.ReadFile(path) // read again: running is what it held at start-up
	w := &Watcher{path: path, interval: d.Interval, clock: d.Clock, log: d.Log, running: running, seen: seen}
	if d.Registerer != nil {
		w.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_config_reloads_total",
			Help:        "Changes of the config file looked at while running, by result: applied or refused.",
			ConstLabels: prometheus.Labels{"vertex": d.Vertex, "replica": strconv.Itoa(d.Replica)}}, []string{"result"})
		w.reloads.WithLabelValues("applied")
		w.reloads.WithLabelValues("refused")
		d.Registerer.MustRegister(w.reloads)
	}
	return w
}

// Run looks at the file every interval, and at once, even when it did not
// change, whenever force receives, and applies each live change with apply,
// until ctx ends; then it returns nil. force may be nil. Run is called once;
// apply is called from Run's goroutine.
func (w *Watcher) Run(ctx context.Context, force <-chan os.Signal, apply func(*config.File) error) error {
	w.apply = apply
	tick := make(chan struct{}, 1)
	var timer clock.Timer
	arm := func() {
		if w.interval > 0 {
			timer = w.clock.AfterFunc(w.interval, func() {
				select {
				case tick <- struct{}{}:
				default:
				}
			})
		}
	}
	arm()
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-force:
			w.check(true)
		case <-tick:
			w.check(false)
			arm()
		}
	}
}

// check reads the config file and applies it when it changed since it was
// last looked at, or always when forced.
func (w *Watcher) check(force bool) {
	data, err := os.ReadFile(w.path)
	if err != nil {
		if force || !errors.Is(err, os.ErrNotExist) {
			w.refuse(err)
		}
		return
	}
	if !force && bytes.Equal(data, w.seen) {
		return
	}
	w.seen = data
	next, err := vertexconfig.Parse(data)
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			ce.File = w.path
			err = errors.New(strings.ReplaceAll(ce.Error(), "\n", "; "))
		}
		w.refuse(err)
		return
	}
	if err := vertexconfig.LiveChange(w.running, next); err != nil {
		w.refuse(err)
		return
	}
	if err := w.apply(next); err != nil {
		w.refuse(err)
		return
	}
	w.running = next
	w.count("applied")
	w.log.Info("config reloaded; a changed rate limit applies from an epoch boundary", zap.String("file", w.path))
}

// refuse logs, in one line, why a change of the config is not applied.
func (w *Watcher) refuse(err error) {
	w.count("refused")
	w.log.Error("config reload refused; the running config stays", zap.String("file", w.path), zap.Error(err))
}

// count counts a change looked at with result.
func (w *Watcher) count(result string) {
	if w.reloads != nil {
		w.reloads.WithLabelValues(result).Inc()
	}
}
