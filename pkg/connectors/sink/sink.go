// Package sink holds the built-in sinks, log, blackhole, [HTTP] and [SQS]. Every
// sink is an [isb.Writer]. The user-defined sink, reached over gRPC, is
// pkg/udf/sinkclient.
package sink

import (
	"context"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// Blackhole takes every message and keeps none of it, like Numaflow's blackhole
// sink.
type Blackhole struct{}

var _ isb.Writer = Blackhole{}

// Write accepts every message.
func (Blackhole) Write(_ context.Context, msgs []isb.Message, errs []error) error {
	clear(errs[:len(msgs)])
	return nil
}
