package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
)

// defaultReloadInterval is how often `vertex run` looks at its config file
// for a change. A ConfigMap update reaches the file within the kubelet's
// sync period, a minute or so, so a second adds little to it.
const defaultReloadInterval = time.Second

// reloader applies the live changes of a running replica's config file: it
// looks at the file every interval, and at once on SIGHUP. A change that
// only touches what can change live (the rate limits' max, min,
// rampUpDuration, modes and shadow) is applied; any other, or a config that
// is not valid, is refused with one log line, and the running config stays.
type reloader struct {
	path     string
	interval time.Duration // 0: on SIGHUP only
	log      *zap.Logger
	running  *config.File
	seen     []byte // the contents last looked at
	apply    func(*config.File) error
	reloads  *prometheus.CounterVec // by result: applied, refused
}

// register registers the reloads counter with reg, labelled with the
// vertex (the MonoVertex, the pipeline vertex of --vertex, or the pipeline
// when all its vertices run in the process) and the replica.
func (r *reloader) register(reg prometheus.Registerer, vertex string, replica int) {
	if r == nil {
		return
	}
	r.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_config_reloads_total",
		Help:        "Changes of the config file looked at while running, by result: applied or refused.",
		ConstLabels: prometheus.Labels{"vertex": vertex, "replica": strconv.Itoa(replica)}}, []string{"result"})
	r.reloads.WithLabelValues("applied")
	r.reloads.WithLabelValues("refused")
	reg.MustRegister(r.reloads)
}

// count counts a reload with result.
func (r *reloader) count(result string) {
	if r.reloads != nil {
		r.reloads.WithLabelValues(result).Inc()
	}
}

// newReloader returns a reloader of the config in path, running as f.
func newReloader(path string, f *config.File, interval time.Duration, log *zap.Logger) *reloader {
	seen, _ := os.ReadFile(path) // read again: f is what it held at start-up
	return &reloader{path: path, interval: interval, log: log, running: f, seen: seen}
}

// watch applies live changes with apply until ctx ends, and returns at
// once; stop waits for the watch to end.
func (r *reloader) watch(ctx context.Context, apply func(*config.File) error) (stop func()) {
	if r == nil {
		return func() {}
	}
	r.apply = apply
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(hup)
		var tick <-chan time.Time
		if r.interval > 0 {
			t := time.NewTicker(r.interval)
			defer t.Stop()
			tick = t.C
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				r.check(true)
			case <-tick:
				r.check(false)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// check reads the config file and applies it when it changed since it was
// last looked at, or always when forced (SIGHUP).
func (r *reloader) check(force bool) {
	data, err := os.ReadFile(r.path)
	if err != nil {
		if force || !errors.Is(err, os.ErrNotExist) {
			r.refuse(err)
		}
		return
	}
	if !force && bytes.Equal(data, r.seen) {
		return
	}
	r.seen = data
	next, err := config.Parse(data)
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			ce.File = r.path
			err = errors.New(strings.ReplaceAll(ce.Error(), "\n", "; "))
		}
		r.refuse(err)
		return
	}
	if err := r.running.LiveChange(next); err != nil {
		r.refuse(err)
		return
	}
	if err := r.apply(next); err != nil {
		r.refuse(err)
		return
	}
	r.running = next
	r.count("applied")
	r.log.Info("config reloaded; a changed rate limit applies from an epoch boundary", zap.String("file", r.path))
}

// refuse logs, in one line, why a change of the config is not applied.
func (r *reloader) refuse(err error) {
	r.count("refused")
	r.log.Error("config reload refused; the running config stays", zap.String("file", r.path), zap.Error(err))
}
