package reduce

import (
	"context"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// Stage is the state a Loop keeps of what it reads: a [Processor]'s
// windows or an [Accumulator]'s key sets. Add makes a batch durable before
// it is acked; Advance moves the watermark and returns what is to be
// written; Commit records that it is written. Open is how many windows or
// key sets are open.
type Stage interface {
	Add(ctx context.Context, msgs []isb.Message) (late int, err error)
	Advance(ctx context.Context, wm time.Time) ([]isb.Message, error)
	Commit() error
	Open() int
}

var (
	_ Stage = (*Processor)(nil)
	_ Stage = (*Accumulator)(nil)
)
