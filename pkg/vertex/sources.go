package vertex

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/secret"
	"github.com/sluiceflow/sluice/pkg/source"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// buildNATS opens the core NATS source at path.
func (v *Vertex) buildNATS(path string, n *config.NatsSource) (isb.Reader, error) {
	cfg := source.NATSConfig{URL: n.URL, Subject: n.Subject, Queue: n.Queue,
		ReadTimeout: v.spec.Limits.GetReadTimeout(), Logger: v.log}
	var err error
	if cfg.TLS, err = secret.TLS(n.TLS, path+".tls"); err != nil {
		return nil, err
	}
	if cfg.Auth, err = natsAuth(path+".auth", n.Auth); err != nil {
		return nil, err
	}
	src, err := source.NewNATS(cfg)
	if err != nil {
		return nil, &config.FieldError{Path: path, Err: err}
	}
	v.onClose(src.Close)
	v.log.Info("nats source", zap.String("subject", n.Subject), zap.String("queue", n.Queue))
	return src, nil
}

// natsAuth reads the secrets of a NATS auth block at path.
func natsAuth(path string, a *config.NatsAuth) (source.NATSAuth, error) {
	var out source.NATSAuth
	var err error
	switch {
	case a == nil:
	case a.Basic != nil:
		if out.User, err = secret.Read(a.Basic.User, path+".basic.user"); err == nil {
			out.Password, err = secret.Read(a.Basic.Password, path+".basic.password")
		}
	case a.Token != nil:
		out.Token, err = secret.Read(a.Token, path+".token")
	case a.NKey != nil:
		out.NKeySeed, err = secret.Read(a.NKey, path+".nkey")
	}
	return out, err
}

// droppingSource is a source that drops messages it cannot hold: core NATS.
type droppingSource interface {
	Dropped() uint64
}

// buildDropped registers sluice_source_dropped_total for a source r that
// drops messages.
func buildDropped(reg prometheus.Registerer, r isb.Reader) {
	d, ok := r.(droppingSource)
	if !ok {
		return
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_source_dropped_total",
		Help: "Messages the source received and dropped because its buffer was full: a core NATS source while the vertex is throttled."},
		func() float64 { return float64(d.Dropped()) }))
}

// buildJetStream opens the JetStream source at path. Without a consumer of
// its own, the vertex reads through numaflow-<store key>-<stream>, the
// durable Numaflow would use.
func (v *Vertex) buildJetStream(path string, j *config.JetStreamSource) (isb.Reader, error) {
	cfg := source.JetStreamConfig{URL: j.URL, Stream: j.Stream, Consumer: j.Consumer, DurableName: v.spec.StoreKey,
		DeliverPolicy: vertexconfig.DeliverFrom(j), FilterSubjects: j.FilterSubjects,
		ReadTimeout: v.spec.Limits.GetReadTimeout(), Logger: v.log}
	var err error
	if cfg.TLS, err = secret.TLS(j.TLS, path+".tls"); err != nil {
		return nil, err
	}
	if cfg.Auth, err = natsAuth(path+".auth", j.Auth); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), jetStreamOpenTimeout)
	defer cancel()
	src, err := source.NewJetStream(ctx, cfg)
	if err != nil {
		return nil, &config.FieldError{Path: path, Err: err}
	}
	v.onClose(src.Close)
	v.log.Info("jetstream source", zap.String("stream", j.Stream), zap.String("consumer", src.Consumer()))
	return src, nil
}

// jetStreamOpenTimeout bounds finding or making a JetStream source's consumer.
const jetStreamOpenTimeout = 30 * time.Second
