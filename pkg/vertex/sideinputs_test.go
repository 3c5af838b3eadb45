package vertex_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/pipeline/sideinputs"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// TestSideInputsGate checks that a vertex naming a side input reads nothing
// and says what it waits for until the side input has a value.
func TestSideInputsGate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := sideinputs.NewMemory()
	files := sideinputs.NewFiles(t.TempDir(), store, []string{"ticker"}, nil)
	done := make(chan error, 1)
	go func() { done <- files.Run(ctx) }()
	defer func() { cancel(); <-done }()

	out, sinkOpt := logSink()
	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "gated", generatorToLog)),
		sinkOpt, vertex.WithSideInputs(files.Gate([]string{"ticker"})))
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, v)
	runtest.WaitFor(t, "notReady naming the side input", func() bool {
		return strings.Contains(v.Status().NotReady, "waiting for side inputs: ticker")
	})
	if s := v.Status(); s.Running || s.ReadTotal != 0 || len(out.Lines()) != 0 {
		t.Fatalf("before the side input's value: status %+v, %d lines", s, len(out.Lines()))
	}
	store.Put(ctx, "ticker", []byte("1"))
	runtest.WaitFor(t, "ready and messages", func() bool { return v.Ready() == nil && len(out.Lines()) > 0 })
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
}
