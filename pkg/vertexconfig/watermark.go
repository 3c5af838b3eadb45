package vertexconfig

import (
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// WatermarkConfig returns a pipeline's spec.watermark, which must be valid,
// as a watermark.Config; nil is the default: watermarks on, no delay.
func WatermarkConfig(w *config.Watermark) watermark.Config {
	if w == nil {
		return watermark.Config{}
	}
	cfg := watermark.Config{Disabled: w.Disabled, MaxDelay: dur(w.MaxDelay)}
	if i := w.IdleSource; i != nil {
		cfg.IdleSource = &watermark.IdleSource{Threshold: dur(i.Threshold), StepInterval: dur(i.StepInterval), IncrementBy: dur(i.IncrementBy)}
	}
	return cfg
}

// dur returns d's duration, 0 for nil.
func dur(d *config.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}
