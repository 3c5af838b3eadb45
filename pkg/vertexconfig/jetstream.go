package vertexconfig

import (
	"context"
	"errors"
	"fmt"
	"os"

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

// The environment of a Numaflow pod that names its inter-step buffer
// service's JetStream server, for a pipeline without spec.isb.jetstream.
const (
	EnvISBSvcJetStreamURL      = "NUMAFLOW_ISBSVC_JETSTREAM_URL"
	EnvISBSvcJetStreamUser     = "NUMAFLOW_ISBSVC_JETSTREAM_USER"
	EnvISBSvcJetStreamPassword = "NUMAFLOW_ISBSVC_JETSTREAM_PASSWORD"
)

// JetStreamConfig reads spec.isb.jetstream, with its secrets; without it,
// the server is that of $NUMAFLOW_ISBSVC_JETSTREAM_URL (and _USER,
// _PASSWORD), as in Numaflow's pods, where an InterStepBufferService names
// it, so that Numaflow's pipelines run on JetStream unchanged.
func JetStreamConfig(p *config.Pipeline, log *zap.Logger) (jetstream.Config, error) {
	if p.Spec.ISB == nil || p.Spec.ISB.JetStream == nil {
		url := os.Getenv(EnvISBSvcJetStreamURL)
		if url == "" {
			return jetstream.Config{}, &config.FieldError{Path: JetStreamPath,
				Err: fmt.Errorf("required to run pipeline %q on JetStream (set its url, nats://host:port, or $%s)", p.Metadata.Name, EnvISBSvcJetStreamURL)}
		}
		js := &config.JetStreamISB{URL: url}
		cfg := jetStreamDefaults(p, js, log)
		cfg.User, cfg.Password = os.Getenv(EnvISBSvcJetStreamUser), os.Getenv(EnvISBSvcJetStreamPassword)
		return cfg, nil
	}
	js := p.Spec.ISB.JetStream
	cfg := jetStreamDefaults(p, js, log)
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

// jetStreamDefaults is the config of js, but for its secrets and TLS.
func jetStreamDefaults(p *config.Pipeline, js *config.JetStreamISB, log *zap.Logger) jetstream.Config {
	return jetstream.Config{URL: js.URL, Name: "sluice-" + p.Metadata.Name, AckWait: js.GetAckWait(),
		DuplicateWindow: js.GetDuplicates(), FrameSize: js.GetFrameSize(), Storage: Storage(js),
		Logger: log.Named("jetstream")}
}
