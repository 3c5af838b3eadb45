package cli

import (
	"errors"
	"os"
	"strconv"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// LoadConfig loads and validates a config; a bad config is a usage error listing
// every problem.
func LoadConfig(path string) (*config.File, error) {
	f, err := vertexconfig.Load(path)
	if err == nil {
		return f, nil
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		return nil, Usagef("%d problem(s) in the config:\n%s", len(ce.Problems), ce.Error())
	}
	return nil, Usagef("%s", err.Error())
}

// ReplicaIndex returns the --replica flag, or $NUMAFLOW_REPLICA, or 0.
func ReplicaIndex(flagValue string) (int, error) {
	v, name := flagValue, "--replica"
	if v == "" {
		v, name = os.Getenv("NUMAFLOW_REPLICA"), "NUMAFLOW_REPLICA"
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, Usagef("%s (%q) must be a whole number, 0 or more", name, v)
	}
	return n, nil
}

// LogIgnored names, in one log line, the Kubernetes-only fields the config
// sets, and logs each of its warnings.
func LogIgnored(log *zap.Logger, f *config.File) {
	if len(f.Ignored) > 0 {
		log.Info("ignoring Kubernetes-only fields", zap.Strings("fields", f.Ignored))
	}
	LogWarnings(log, f)
}

// LogWarnings logs each warning of the config, a line each.
func LogWarnings(log *zap.Logger, f *config.File) {
	for _, w := range f.Warnings {
		log.Warn("the config allows this, but it is likely a mistake", zap.String("warning", w.String()))
	}
}
