package vertex

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/secret"
	"github.com/sluiceflow/sluice/pkg/sink"
)

// buildHTTPSink opens the http sink at path, reading its secret headers and
// TLS files.
func (v *Vertex) buildHTTPSink(path string, h *config.HTTPSink) (isb.Writer, error) {
	cfg := sink.HTTPConfig{URL: h.URL, Method: h.Method, Header: http.Header{}, Batch: h.Batch,
		Logger: v.log, Clock: v.o.clock}
	for name, value := range h.Headers {
		cfg.Header.Set(name, value)
	}
	for name, s := range h.HeaderSecrets {
		value, err := secret.Read(s, path+".headerSecrets."+name)
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
	if cfg.TLS, err = secret.TLS(h.TLS, path+".tls"); err != nil {
		return nil, err
	}
	w, err := sink.NewHTTP(cfg)
	if err != nil {
		return nil, &config.FieldError{Path: path, Err: err}
	}
	v.onClose(w.Close)
	v.log.Info("http sink", zap.String("url", h.URL), zap.Bool("batch", h.Batch))
	return w, nil
}
