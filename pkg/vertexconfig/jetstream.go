package vertexconfig

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/isb/jetstream"
)

// JetStreamPath is where a pipeline's JetStream settings sit in its YAML.
const JetStreamPath = "spec.isb.jetstream"

// ConnectJetStream connects once to the server of cfg; credentials the server
// refuses are a [*config.FieldError] naming spec.isb.jetstream.
func ConnectJetStream(ctx context.Context, cfg jetstream.Config) (*jetstream.Conn, error) {
	conn, err := jetstream.Connect(ctx, cfg)
	if errors.Is(err, jetstream.ErrAuth) || errors.Is(err, jetstream.ErrInvalidConfig) {
		return nil, &config.FieldError{Path: JetStreamPath, Err: err}
	}
	return conn, err
}

// JetStreamConfig reads spec.isb.jetstream, with its secrets.
func JetStreamConfig(p *config.Pipeline, log *zap.Logger) (jetstream.Config, error) {
	if p.Spec.ISB == nil || p.Spec.ISB.JetStream == nil {
		return jetstream.Config{}, &config.FieldError{Path: JetStreamPath,
			Err: fmt.Errorf("required to run pipeline %q on JetStream (set its url, nats://host:port)", p.Metadata.Name)}
	}
	js := p.Spec.ISB.JetStream
	cfg := jetstream.Config{URL: js.URL, Name: "sluice-" + p.Metadata.Name, AckWait: js.GetAckWait(),
		DuplicateWindow: js.GetDuplicates(), FrameSize: js.GetFrameSize(), Storage: Storage(js),
		Logger: log.Named("jetstream")}
	var err error
	for _, s := range []struct {
		sel   *config.SecretKeySelector
		field string
		dst   *string
	}{{js.User, "user", &cfg.User}, {js.Password, "password", &cfg.Password}, {js.Token, "token", &cfg.Token}} {
		if s.sel != nil {
			if *s.dst, err = readSecret(s.sel, JetStreamPath+"."+s.field); err != nil {
				return cfg, err
			}
		}
	}
	if cfg.TLS, err = readTLS(js.TLS, JetStreamPath+".tls"); err != nil {
		return cfg, err
	}
	return cfg, nil
}
