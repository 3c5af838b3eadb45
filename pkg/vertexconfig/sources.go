package vertexconfig

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udf/sourceclient"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// sourceFunc returns the constructor of the source src at path.
func sourceFunc(path string, src *config.Source) vertex.SourceFunc {
	return func(env vertex.Env) (isb.Reader, error) {
		switch {
		case src.Generator != nil:
			return generator(env, path+".generator", src.Generator)
		case src.HTTP != nil:
			return httpSource(env, path+".http", src.HTTP)
		case src.UDSource != nil:
			c := sourceclient.New(env.SocketDir, env.Limits.ReadTimeout, env.Log, udf.WithCalls(env.Calls))
			env.Remote(udf.KindSource, c)
			return c, nil
		case src.Nats != nil:
			return natsSource(env, path+".nats", src.Nats)
		case src.JetStream != nil:
			return jetStreamSource(env, path+".jetstream", src.JetStream)
		case src.Kafka != nil:
			return kafkaSource(env, path+".kafka", src.Kafka)
		case src.SQS != nil:
			return sqsSource(env, path+".sqs", src.SQS)
		}
		return nil, fmt.Errorf("%s: no source sluice runs", path)
	}
}

func generator(env vertex.Env, path string, g *config.Generator) (isb.Reader, error) {
	cfg := source.GeneratorConfig{RPU: config.DefaultGeneratorRPU, Duration: config.DefaultGeneratorDuration,
		MsgSize: config.DefaultGeneratorMsgSize, Value: g.Value, Replica: env.Replica, Vertex: env.Name,
		ReadTimeout: env.Limits.ReadTimeout, Clock: env.Clock}
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
			return nil, &config.FieldError{Path: path + ".valueBlob", Err: err}
		}
		cfg.ValueBlob = blob
	}
	return source.NewGenerator(cfg)
}

// natsSource opens the core NATS source at path.
func natsSource(env vertex.Env, path string, n *config.NatsSource) (isb.Reader, error) {
	cfg := source.NATSConfig{URL: n.URL, Subject: n.Subject, Queue: n.Queue,
		ReadTimeout: env.Limits.ReadTimeout, Logger: env.Log}
	var err error
	if cfg.TLS, err = readTLS(n.TLS, path+".tls"); err != nil {
		return nil, err
	}
	if cfg.Auth, err = natsAuth(path+".auth", n.Auth); err != nil {
		return nil, err
	}
	src, err := source.NewNATS(cfg)
	if err != nil {
		return nil, &config.FieldError{Path: path, Err: err}
	}
	env.OnClose(src.Close)
	env.Log.Info("nats source", zap.String("subject", n.Subject), zap.String("queue", n.Queue))
	return src, nil
}

// natsAuth reads the secrets of a NATS auth block at path.
func natsAuth(path string, a *config.NatsAuth) (source.NATSAuth, error) {
	var out source.NATSAuth
	var err error
	switch {
	case a == nil:
	case a.Basic != nil:
		if out.User, err = readSecret(a.Basic.User, path+".basic.user"); err == nil {
			out.Password, err = readSecret(a.Basic.Password, path+".basic.password")
		}
	case a.Token != nil:
		out.Token, err = readSecret(a.Token, path+".token")
	case a.NKey != nil:
		out.NKeySeed, err = readSecret(a.NKey, path+".nkey")
	}
	return out, err
}

// jetStreamSource opens the JetStream source at path. Without a consumer of
// its own, the vertex reads through numaflow-<store key>-<stream>, the
// durable Numaflow would use.
func jetStreamSource(env vertex.Env, path string, j *config.JetStreamSource) (isb.Reader, error) {
	cfg := source.JetStreamConfig{URL: j.URL, Stream: j.Stream, Consumer: j.Consumer, DurableName: env.StoreKey,
		DeliverPolicy: DeliverFrom(j), FilterSubjects: j.FilterSubjects,
		ReadTimeout: env.Limits.ReadTimeout, Logger: env.Log}
	var err error
	if cfg.TLS, err = readTLS(j.TLS, path+".tls"); err != nil {
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
	env.OnClose(src.Close)
	env.Log.Info("jetstream source", zap.String("stream", j.Stream), zap.String("consumer", src.Consumer()))
	return src, nil
}

// jetStreamOpenTimeout bounds finding or making a JetStream source's consumer.
const jetStreamOpenTimeout = 30 * time.Second
