package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sink"
)

// runPipelineVertex runs one replica of one vertex of p, on JetStream: the
// buffers it reads and writes are created if missing.
func runPipelineVertex(ctx context.Context, p *config.Pipeline, name string, o runtimeOptions) (err error) {
	g := graph{p}
	if p.Vertex(name) == nil {
		return usagef("run: --vertex %q: no such vertex in pipeline %q (vertices: %s)", name, p.Metadata.Name, g.vertexNames())
	}
	backend, err := newJetStreamISB(ctx, p, o.log)
	if err != nil {
		return err
	}
	closers := []func() error{backend.close}
	defer func() {
		if err != nil {
			closeAll(closers)
		}
	}()
	spec, err := pipelineVertexSpec(ctx, g, name, backend, o.registry, &closers)
	if err != nil {
		return err
	}
	v, err := buildVertex(spec, o)
	if err != nil {
		return err
	}
	// The buffers' readers and the connection are closed after everything else.
	v.closers = append(closers, v.closers...)
	closers = nil
	o.log.Info("running", zap.String("pipeline", p.Metadata.Name), zap.String("vertex", name), zap.Int("replica", o.replica))
	err = v.run(ctx)
	o.log.Info("stopped", zap.Error(err))
	return err
}

// runPipeline runs every vertex of p in this process, on in-memory buffers or
// on JetStream, until ctx ends (see pipelineRun.run).
func runPipeline(ctx context.Context, p *config.Pipeline, onJetStream bool, o runtimeOptions) (err error) {
	pr, err := buildPipeline(ctx, p, onJetStream, o)
	if err != nil {
		return err
	}
	defer pr.close()
	if o.metricsAddr != "" {
		server, err := observe.Listen(o.metricsAddr, observe.Handlers{Gatherer: o.registry, Ready: pr.ready, Status: pr.status}, o.log)
		if err != nil {
			return fmt.Errorf("--metrics-addr %s: %w", o.metricsAddr, err)
		}
		o.log.Info("serving metrics, health and status", zap.String("addr", server.Addr().String()))
		serveCtx, stopServing := context.WithCancel(context.Background())
		served := make(chan struct{})
		go func() {
			defer close(served)
			server.Serve(serveCtx)
		}()
		defer func() {
			stopServing()
			<-served
		}()
	}
	o.log.Info("running", zap.String("pipeline", p.Metadata.Name), zap.Int("vertices", len(pr.all)),
		zap.Bool("jetstream", onJetStream))
	// A second SIGTERM or SIGINT stops without waiting for the buffers to drain.
	force, forceNow := context.WithCancel(context.Background())
	defer forceNow()
	go func() {
		select {
		case <-ctx.Done():
		case <-force.Done():
			return
		}
		again := make(chan os.Signal, 1)
		signal.Notify(again, syscall.SIGTERM, syscall.SIGINT)
		defer signal.Stop(again)
		select {
		case <-again:
			o.log.Warn("second signal: stopping without draining the buffers")
			forceNow()
		case <-force.Done():
		}
	}()
	err = pr.run(ctx, force)
	o.log.Info("stopped", zap.Error(err))
	return err
}

// pipelineRun is every vertex of a pipeline, built to run in one process.
type pipelineRun struct {
	sources, others, all []*vertex
	mem                  *memoryISB // nil on JetStream
	closers              []func() error
	log                  *zap.Logger
}

// buildPipeline builds every vertex of p, each with its own directory of
// sockets (<uds-dir>/<vertex>) when it has user-defined containers, and all
// with one log sink.
func buildPipeline(ctx context.Context, p *config.Pipeline, onJetStream bool, o runtimeOptions) (_ *pipelineRun, err error) {
	g := graph{p}
	if o.registry == nil {
		o.registry = prometheus.NewRegistry()
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	pr := &pipelineRun{log: o.log}
	if !onJetStream {
		if pr.mem, err = newMemoryISB(g); err != nil {
			return nil, err
		}
		pr.closers = []func() error{pr.mem.close}
	}
	defer func() {
		if err != nil {
			pr.close()
		}
	}()
	base := o
	base.metricsAddr = ""
	if base.stdout == nil {
		base.stdout = os.Stdout
	}
	base.logSink = sink.NewLog(base.stdout)
	for _, pv := range p.Spec.Vertices {
		vo := base
		if len(containersOf(pv.Source, pv.UDF, pv.Sink)) > 0 {
			// The containers of each vertex have sockets of the same names, so
			// each vertex has a directory of its own.
			dir := base.udsDir
			if dir == "" {
				dir = serverinfo.DefaultDir
			}
			vo.udsDir = filepath.Join(dir, pv.Name)
			if vo.spawn {
				if err := os.MkdirAll(vo.udsDir, 0o755); err != nil {
					return nil, err
				}
			}
		}
		var backend isbBackend = pr.mem
		if onJetStream {
			// A connection per vertex, as when each runs in a process of its
			// own: the server works through each connection in turn.
			js, err := newJetStreamISB(ctx, p, o.log)
			if err != nil {
				return nil, err
			}
			pr.closers = append(pr.closers, js.close)
			backend = js
		}
		spec, err := pipelineVertexSpec(ctx, g, pv.Name, backend, o.registry, &pr.closers)
		if err != nil {
			return nil, err
		}
		v, err := buildVertex(spec, vo)
		if err != nil {
			return nil, err
		}
		if pv.Source != nil {
			pr.sources = append(pr.sources, v)
		} else {
			pr.others = append(pr.others, v)
		}
		pr.all = append(pr.all, v)
	}
	return pr, nil
}

// drainTimeout bounds how long a pipeline in one process waits, once its
// sources have stopped, for its in-memory buffers to empty.
const drainTimeout = 30 * time.Second

// run runs every vertex until ctx ends. Then the sources stop first; with
// in-memory buffers the other vertices go on until the buffers are empty (at
// most drainTimeout, or until force ends), so that nothing read is lost, and
// then stop. A vertex that fails stops them all.
func (pr *pipelineRun) run(ctx, force context.Context) error {
	grp, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
	restCtx, stopRest := context.WithCancel(gctx)
	defer stopRest()
	srcCtx, stopSources := context.WithCancel(gctx)
	defer stopSources()
	stopWatch := context.AfterFunc(ctx, stopSources)
	defer stopWatch()

	srcDone := make(chan struct{})
	var srcs errgroup.Group
	for _, v := range pr.sources {
		srcs.Go(func() error { return v.run(srcCtx) })
	}
	grp.Go(func() error {
		defer close(srcDone)
		return srcs.Wait()
	})
	for _, v := range pr.others {
		grp.Go(func() error { return v.run(restCtx) })
	}
	grp.Go(func() error {
		select {
		case <-srcDone:
		case <-gctx.Done():
			return nil
		}
		if pr.mem != nil && gctx.Err() == nil {
			dctx, cancel := context.WithCancel(gctx)
			stop := context.AfterFunc(force, cancel)
			pr.drain(dctx)
			stop()
			cancel()
		}
		stopRest()
		return nil
	})
	return grp.Wait()
}

// drain waits, at most drainTimeout, until the in-memory buffers are empty.
func (pr *pipelineRun) drain(ctx context.Context) {
	deadline := time.Now().Add(drainTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !pr.mem.drained() {
		if time.Now().After(deadline) {
			pr.log.Warn("buffers not drained before the timeout; their messages are lost", zap.Int("messages", pr.mem.left()),
				zap.Duration("timeout", drainTimeout))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (pr *pipelineRun) ready() error {
	var errs []error
	for _, v := range pr.all {
		errs = append(errs, v.ready())
	}
	return errors.Join(errs...)
}

func (pr *pipelineRun) status() any {
	out := make([]vertexStatus, len(pr.all))
	for i, v := range pr.all {
		out[i] = v.status()
	}
	return out
}

// written is what the sink vertices have written.
func (pr *pipelineRun) written() float64 {
	var n float64
	for _, v := range pr.others {
		if v.isSink {
			n += counterValue(v.metrics.Written)
		}
	}
	return n
}

// close closes every vertex (those that ran closed themselves already), then
// the buffers' readers and writers, then the buffers' backend.
func (pr *pipelineRun) close() {
	for _, v := range pr.all {
		v.close()
	}
	closeAll(pr.closers)
	pr.closers = nil
}

// closeAll closes in reverse order.
func closeAll(closers []func() error) {
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
}
