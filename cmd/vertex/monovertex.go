package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/forward"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sink"
	"github.com/sluiceflow/sluice/pkg/source"
)

// buildMonoVertex assembles a MonoVertex: a vertex whose source, functions and
// sink run in one forwarder.
func buildMonoVertex(m *config.MonoVertex, o runtimeOptions) (*vertex, error) {
	spec := &m.Spec
	return buildVertex(&vertexSpec{
		name: m.Metadata.Name, storeKey: m.Metadata.Name,
		batchSize: spec.Limits.GetReadBatchSize(), readTimeout: spec.Limits.GetReadTimeout(),
		rateLimit: spec.Limits.GetRateLimit(),
		source:    spec.Source, udf: spec.UDF, sink: spec.Sink,
	}, o)
}

func (v *vertex) buildSource(s *vertexSpec, log *zap.Logger) (isb.Reader, error) {
	readTimeout := s.readTimeout
	src := s.source
	switch {
	case src.Generator != nil:
		g := src.Generator
		cfg := source.GeneratorConfig{RPU: config.DefaultGeneratorRPU, Duration: config.DefaultGeneratorDuration,
			MsgSize: config.DefaultGeneratorMsgSize, Value: g.Value, Replica: v.opts.replica, Vertex: v.name, ReadTimeout: readTimeout}
		if g.RPU != nil {
			cfg.RPU = *g.RPU
		}
		if g.Duration != nil {
			cfg.Duration = g.Duration.Duration
		}
		if g.MsgSize != nil {
			cfg.MsgSize = int(*g.MsgSize)
		}
		if g.KeyCount != nil {
			cfg.KeyCount = int(*g.KeyCount)
		}
		if g.Jitter != nil {
			cfg.Jitter = g.Jitter.Duration
		}
		if g.ValueBlob != nil {
			blob, err := base64.StdEncoding.DecodeString(*g.ValueBlob)
			if err != nil {
				return nil, err
			}
			cfg.ValueBlob = blob
		}
		return source.NewGenerator(cfg)
	case src.HTTP != nil:
		return v.buildHTTP(s, log)
	case src.UDSource != nil:
		return remoteOf(v, source.NewUD(v.opts.udsDir, readTimeout, log)), nil
	}
	return nil, errors.New("source: no supported source")
}

func (v *vertex) buildHTTP(s *vertexSpec, log *zap.Logger) (isb.Reader, error) {
	h := s.source.HTTP
	addr := v.opts.httpAddr
	if addr == "" {
		port := int32(8090)
		if h.Ports != nil && h.Ports.HTTP != nil {
			port = *h.Ports.HTTP
		}
		addr = ":" + strconv.Itoa(int(port))
	}
	cfg := source.HTTPConfig{Addr: addr, Vertex: v.name, Queue: s.batchSize,
		ReadTimeout: s.readTimeout, Logger: log, RetryAfter: v.retryAfter}
	if h.Auth != nil && h.Auth.Token != nil {
		token, err := readSecret(h.Auth.Token)
		if err != nil {
			return nil, fmt.Errorf("source.http.auth.token: %w", err)
		}
		cfg.Token = token
	}
	hs, err := source.NewHTTP(cfg)
	if err != nil {
		return nil, fmt.Errorf("http source on %s: %w", addr, err)
	}
	v.closers = append(v.closers, hs.Close)
	log.Info("http source listening", zap.String("addr", hs.Addr().String()), zap.String("path", "/vertices/"+v.name))
	return hs, nil
}

// retryAfter tells turned-away HTTP clients when tokens come: at the next epoch.
func (v *vertex) retryAfter() time.Duration {
	if v.limiter == nil {
		return time.Second
	}
	return time.Until(time.Unix(v.limiter.Status().Epoch+1, 0))
}

// secretsDir is where Numaflow mounts the secrets a vertex names.
const secretsDir = "/var/numaflow/secrets"

// secretPath is the file of a secret: its own, or Numaflow's mount of it.
func secretPath(s *config.SecretKeySelector) string {
	if s.File != "" {
		return s.File
	}
	return filepath.Join(secretsDir, s.Name, s.Key)
}

// readSecret reads a secret, trimmed of surrounding white space.
func readSecret(s *config.SecretKeySelector) (string, error) {
	b, err := os.ReadFile(secretPath(s))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func (v *vertex) buildSink(s *config.AbstractSink, kind serverinfo.Kind, log *zap.Logger) isb.Writer {
	switch {
	case s.Log != nil:
		return v.opts.logSink
	case s.UDSink != nil:
		return remoteOf(v, sink.NewUD(v.opts.udsDir, kind, log))
	}
	return sink.Blackhole{}
}

// defaultFallbackSteps is how many writes a message gets before it goes to the
// fallback sink, when there is one and retryStrategy does not say.
const defaultFallbackSteps = 10

// retryPolicy maps a sink's retryStrategy to the forwarder's. sluice's default
// backs off from 1ms, doubling to at most 1s, and retries until the sink takes the
// message, or, when a fallback sink is configured, for 10 attempts before writing
// it there.
func retryPolicy(r *config.RetryStrategy, hasFallback bool) forward.RetryPolicy {
	p := forward.RetryPolicy{Interval: time.Millisecond, MaxInterval: time.Second}
	if hasFallback && (r == nil || r.OnFailure == nil) {
		p.Steps, p.OnFailure = defaultFallbackSteps, forward.Fallback
	}
	if r == nil {
		return p
	}
	if b := r.Backoff; b != nil {
		if b.Interval != nil {
			p.Interval = b.Interval.Duration
		}
		if b.Cap != nil {
			p.MaxInterval = b.Cap.Duration
		}
		if b.Steps != nil {
			p.Steps = int(*b.Steps)
		}
	}
	if r.OnFailure != nil {
		switch *r.OnFailure {
		case config.OnFailureFallback:
			p.OnFailure = forward.Fallback
		case config.OnFailureDrop:
			p.OnFailure = forward.Drop
		}
	}
	return p
}

// registerProcessCollectors adds the Go runtime and process metrics.
func registerProcessCollectors(reg *prometheus.Registry) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// counterValue reads a counter's current value.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
