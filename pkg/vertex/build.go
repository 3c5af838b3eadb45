package vertex

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/forward"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/secret"
	"github.com/sluiceflow/sluice/pkg/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sink"
	"github.com/sluiceflow/sluice/pkg/source"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// buildSource opens the vertex's source.
func (v *Vertex) buildSource() (isb.Reader, error) {
	src := v.spec.Source
	switch {
	case src.Generator != nil:
		return v.buildGenerator(src.Generator)
	case src.HTTP != nil:
		return v.buildHTTP(src.HTTP)
	case src.UDSource != nil:
		return remoteOf(v, serverinfo.KindSource, source.NewUD(v.o.socketDir, v.spec.Limits.GetReadTimeout(), v.log)), nil
	case src.Nats != nil:
		return v.buildNATS(v.spec.Path+".source.nats", src.Nats)
	case src.JetStream != nil:
		return v.buildJetStream(v.spec.Path+".source.jetstream", src.JetStream)
	case src.Kafka != nil:
		return v.buildKafkaSource(v.spec.Path+".source.kafka", src.Kafka)
	}
	return nil, fmt.Errorf("%s.source: no source sluice runs", v.spec.Path)
}

func (v *Vertex) buildGenerator(g *config.Generator) (isb.Reader, error) {
	cfg := source.GeneratorConfig{RPU: config.DefaultGeneratorRPU, Duration: config.DefaultGeneratorDuration,
		MsgSize: config.DefaultGeneratorMsgSize, Value: g.Value, Replica: v.o.replica, Vertex: v.spec.Name,
		ReadTimeout: v.spec.Limits.GetReadTimeout(), Clock: v.o.clock}
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
	cfg.Keys = g.Keys
	if g.Jitter != nil {
		cfg.Jitter = g.Jitter.Duration
	}
	if g.ValueBlob != nil {
		blob, err := base64.StdEncoding.DecodeString(*g.ValueBlob)
		if err != nil {
			return nil, &config.FieldError{Path: v.spec.Path + ".source.generator.valueBlob", Err: err}
		}
		cfg.ValueBlob = blob
	}
	return source.NewGenerator(cfg)
}

// defaultHTTPPort is where an http source listens without ports.http.
const defaultHTTPPort = 8090

func (v *Vertex) buildHTTP(h *config.HTTPSource) (isb.Reader, error) {
	addr := v.o.httpAddr
	if addr == "" {
		port := int32(defaultHTTPPort)
		if h.Ports != nil && h.Ports.HTTP != nil {
			port = *h.Ports.HTTP
		}
		addr = ":" + strconv.Itoa(int(port))
	}
	cfg := source.HTTPConfig{Addr: addr, Vertex: v.spec.Name, Queue: v.spec.Limits.GetReadBatchSize(),
		MaxQueueBytes: vertexconfig.HTTPMaxQueueBytes(h), ReadTimeout: v.spec.Limits.GetReadTimeout(), Logger: v.log, RetryAfter: v.retryAfter}
	if h.Auth != nil && h.Auth.Token != nil {
		token, err := secret.Read(h.Auth.Token, v.spec.Path+".source.http.auth.token")
		if err != nil {
			return nil, err
		}
		cfg.Token = token
	}
	hs, err := source.NewHTTP(cfg)
	if err != nil {
		return nil, fmt.Errorf("http source on %s: %w", addr, err)
	}
	v.onClose(hs.Close)
	v.log.Info("http source listening", zap.String("addr", hs.Addr().String()), zap.String("path", "/vertices/"+v.spec.Name))
	return hs, nil
}

// retryAfter tells turned-away HTTP clients when tokens come: at the next epoch.
func (v *Vertex) retryAfter() time.Duration {
	if v.limiter == nil {
		return time.Second
	}
	next := time.Unix(v.limiter.Status().Epoch+1, 0)
	return next.Sub(v.o.clock.Now())
}

// buildFunctions sets the transformer and the UDF of one forwarder. Each
// forwarder has its own: a user-defined function's client carries one batch at
// a time.
func (v *Vertex) buildFunctions(d *forward.Deps) (err error) {
	if src := v.spec.Source; src != nil && src.Transformer != nil {
		if t := src.Transformer; t.Container != nil {
			d.Transformer = remoteOf(v, serverinfo.KindSourceTransformer, udf.NewRemoteTransformer(v.o.socketDir, v.log))
		} else if d.Transformer, err = udf.NewBuiltinTransformer(t.Builtin.Name, t.Builtin.KWArgs, v.log); err != nil {
			return &config.FieldError{Path: v.spec.Path + ".source.transformer.builtin", Err: err}
		}
	}
	if u := v.spec.UDF; u != nil {
		if u.Container != nil {
			d.Mapper = remoteOf(v, serverinfo.KindMap, udf.NewRemoteMap(v.o.socketDir, v.log))
		} else if d.Mapper, err = udf.NewBuiltin(u.Builtin.Name, u.Builtin.KWArgs, v.log); err != nil {
			return &config.FieldError{Path: v.spec.Path + ".udf.builtin", Err: err}
		}
	}
	return nil
}

// buildWriters sets the sink and fallback sink of one forwarder: the
// configured sinks, or the writer along the vertex's edges.
func (v *Vertex) buildWriters(d *forward.Deps) (err error) {
	if s := v.spec.Sink; s != nil {
		if d.Sink, err = v.buildSink(v.spec.Path+".sink", &s.AbstractSink, serverinfo.KindSink); err != nil {
			return err
		}
		if fb := s.Fallback; fb != nil {
			d.Fallback, err = v.buildSink(v.spec.Path+".sink.fallback", fb, serverinfo.KindFallbackSink)
		}
		return err
	}
	w, err := v.spec.Output()
	if err != nil {
		return err
	}
	if w == nil {
		return errors.New("vertex " + v.spec.Name + ": no writer along its edges")
	}
	d.Sink = w
	return nil
}

// buildSink returns the writer of the sink s at path. A Kafka or http sink is
// opened once and shared by the vertex's forwarders.
func (v *Vertex) buildSink(path string, s *config.AbstractSink, kind serverinfo.Kind) (isb.Writer, error) {
	switch {
	case s.Log != nil:
		return v.o.logSink, nil
	case s.UDSink != nil:
		return remoteOf(v, kind, sink.NewUD(v.o.socketDir, kind, v.log)), nil
	case s.HTTP == nil && s.Kafka == nil:
		return sink.Blackhole{}, nil
	}
	if w, ok := v.clients[s]; ok {
		return w, nil
	}
	var w isb.Writer
	var err error
	if s.HTTP != nil {
		w, err = v.buildHTTPSink(path+".http", s.HTTP)
	} else {
		w, err = v.buildKafkaSink(path+".kafka", s.Kafka)
	}
	if err != nil {
		return nil, err
	}
	if v.clients == nil {
		v.clients = map[*config.AbstractSink]isb.Writer{}
	}
	v.clients[s] = w
	return w, nil
}

// excludeDropped reports whether the tokens of dropped messages go back.
func (v *Vertex) excludeDropped() bool {
	rl := v.spec.Limits.GetRateLimit()
	return v.limiter != nil && rl.ExcludeDropped != nil && *rl.ExcludeDropped
}

// signal returns what the forwarders do with a throttle signal: with
// rateLimit.adaptive, give the kinds it lists to the limiter, which cuts the
// pool and pauses for the Retry-After; without, nil.
func (v *Vertex) signal() func(kind string, retryAfter time.Duration) {
	rl := v.spec.Limits.GetRateLimit()
	if v.limiter == nil || rl == nil || rl.Adaptive == nil {
		return nil
	}
	kinds := vertexconfig.SignalKinds(rl.Adaptive)
	return func(kind string, retryAfter time.Duration) {
		if slices.Contains(kinds, kind) {
			v.limiter.Signal(retryAfter)
		}
	}
}

// defaultFallbackSteps is how many writes a message gets before it goes to the
// fallback sink, when there is one and retryStrategy does not say.
const defaultFallbackSteps = 10

// retryPolicy maps a sink's retryStrategy to the forwarder's, whose defaults
// fill what it leaves unset. sluice retries until the sink takes the message,
// or, when a fallback sink is configured, for 10 attempts before writing it
// there. A vertex writing to buffers retries until they take it.
func retryPolicy(s *config.Sink) forward.RetryPolicy {
	var p forward.RetryPolicy
	if s == nil {
		return p
	}
	r := s.RetryStrategy
	if s.Fallback != nil && (r == nil || r.OnFailure == nil) {
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
	if f, ok := vertexconfig.OnFailure(r); ok {
		p.OnFailure = f
	}
	return p
}
