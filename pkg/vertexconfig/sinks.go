package vertexconfig

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udf/mapclient"
	"github.com/sluiceflow/sluice/pkg/udf/sinkclient"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// sinkFunc returns the constructor of the sink s at path, the vertex's sink
// of kind (udf.KindSink, KindFallbackSink or KindOnSuccessSink). A
// Kafka, http or SQS sink is opened once and shared by the vertex's forwarders;
// the others are one per forwarder.
func sinkFunc(path string, s *config.AbstractSink, kind udf.Kind) vertex.SinkFunc {
	return func(env vertex.Env) (isb.Writer, error) {
		switch {
		case s.Log != nil:
			return env.LogSink, nil
		case s.UDSink != nil:
			c := sinkclient.New(env.SocketDir, kind, env.Log, udf.WithCalls(env.Calls))
			c.SetWatermark(env.Watermark)
			env.Remote(kind, c)
			return c, nil
		case s.HTTP != nil:
			return env.Shared(s, func() (isb.Writer, error) { return httpSink(env, path+".http", s.HTTP) })
		case s.Kafka != nil:
			return env.Shared(s, func() (isb.Writer, error) { return kafkaSink(env, path+".kafka", s.Kafka) })
		case s.SQS != nil:
			return env.Shared(s, func() (isb.Writer, error) { return sqsSink(env, path+".sqs", s.SQS) })
		}
		return sink.Blackhole{}, nil
	}
}

// transformerFunc returns the constructor of the source transformer t at
// path: a client of its container, or a built-in.
func transformerFunc(path string, t *config.Transformer) vertex.FunctionFunc {
	return func(env vertex.Env) (udf.Mapper, error) {
		if t.Container != nil {
			c := mapclient.NewTransformer(env.SocketDir, env.Log, udf.WithCalls(env.Calls))
			c.SetWatermark(env.Watermark)
			env.Remote(udf.KindSourceTransformer, c)
			return c, nil
		}
		m, err := udf.NewBuiltinTransformer(t.Builtin.Name, t.Builtin.KWArgs, env.Log)
		if err != nil {
			return nil, &config.FieldError{Path: path + ".builtin", Err: err}
		}
		return m, nil
	}
}

// mapFunc returns the constructor of the map function u at path: a client of
// its container, or a built-in.
func mapFunc(path string, u *config.UDF) vertex.FunctionFunc {
	return func(env vertex.Env) (udf.Mapper, error) {
		if u.Container != nil {
			c := mapclient.New(env.SocketDir, env.Log, udf.WithCalls(env.Calls))
			c.SetWatermark(env.Watermark)
			env.Remote(udf.KindMap, c)
			return c, nil
		}
		m, err := udf.NewBuiltin(u.Builtin.Name, u.Builtin.KWArgs, env.Log)
		if err != nil {
			return nil, &config.FieldError{Path: path + ".builtin", Err: err}
		}
		return m, nil
	}
}

// httpSink opens the http sink at path, reading its secret headers and TLS
// files.
func httpSink(env vertex.Env, path string, h *config.HTTPSink) (isb.Writer, error) {
	cfg := sink.HTTPConfig{URL: h.URL, Method: h.Method, Header: http.Header{}, Batch: h.Batch,
		Logger: env.Log, Clock: env.Clock}
	for name, value := range h.Headers {
		cfg.Header.Set(name, value)
	}
	for name, s := range h.HeaderSecrets {
		value, err := readSecret(s, path+".headerSecrets."+name)
		if err != nil {
			return nil, err
		}
		cfg.Header.Set(name, value)
	}
	if h.Timeout != nil {
		cfg.Timeout = h.Timeout.Duration
	}
	if h.Concurrency != nil {
		cfg.Concurrency = int(*h.Concurrency)
	}
	if h.MaxRetryAfter != nil {
		cfg.MaxRetryAfter = h.MaxRetryAfter.Duration
	}
	var err error
	if cfg.TLS, err = readTLS(h.TLS, path+".tls"); err != nil {
		return nil, err
	}
	w, err := sink.NewHTTP(cfg)
	if err != nil {
		return nil, &config.FieldError{Path: path, Err: err}
	}
	env.OnClose(w.Close)
	env.Log.Info("http sink", zap.String("url", h.URL), zap.Bool("batch", h.Batch))
	return w, nil
}
