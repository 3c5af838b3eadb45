package vertex_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/monitor"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/udsconn"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// TestUDFErrorsRecordedForTheMonitor: a map whose handler panics fails with
// the SDK's UDF_EXECUTION_ERROR; with a reporter as the processor sets one,
// the error is recorded where the monitor serves it from, under the udf
// container.
func TestUDFErrorsRecordedForTheMonitor(t *testing.T) {
	dir, err := os.MkdirTemp("", "mon")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	store := monitor.NewStore(t.TempDir(), 0)
	udsconn.ReportFailures(func(err error) {
		if monitor.IsUDFError(err) {
			store.Record(monitor.EntryOf(err, time.Now()))
		}
	})
	t.Cleanup(func() { udsconn.ReportFailures(nil) })

	t.Setenv("NUMAFLOW_UD_CONTAINER_TYPE", "udf")
	src := &counting{count: 10, acked: map[int]bool{}}
	serve(t, sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- mapper.NewServer(mapper.MapperFunc(func(context.Context, []string, mapper.Datum) mapper.Messages {
			panic("boom")
		}), mapper.WithSocketDir(dir)).Start(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done }) // Start fails after the panic

	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "mon", `  limits:
    readBatchSize: 5
    readTimeout: 100ms
  source:
    udsource:
      container: {image: source}
  udf:
    container: {image: map}
  sink:
    blackhole: {}
`)), vertex.WithSocketDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, v)
	var got []monitor.Entry
	runtest.WaitFor(t, "the map's error recorded", func() bool {
		got, _ = store.Entries()
		return len(got) > 0
	})
	r.Stop(t)
	if e := got[0]; e.Container != "udf" || e.Code != "Internal error" || !strings.Contains(e.Message, "UDF_EXECUTION_ERROR(udf)") || !strings.Contains(e.Message, "boom") {
		t.Fatalf("recorded %+v", e)
	}
}
