package vertex_test

import (
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// wait bounds every wait in these tests.
const wait = 10 * time.Second

// monoVertex parses a MonoVertex YAML whose spec is spec (indented by two).
func monoVertex(t *testing.T, name, spec string) *config.MonoVertex {
	t.Helper()
	f, err := vertexconfig.Parse([]byte("apiVersion: numaflow.numaproj.io/v1alpha1\nkind: MonoVertex\nmetadata:\n  name: " + name + "\nspec:\n" + spec))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return f.MonoVertex
}

// logSink returns a log sink option writing to a new buffer.
func logSink() (*runtest.Buffer, vertex.Option) {
	b := &runtest.Buffer{}
	return b, vertex.WithLogSink(sink.NewLog(b))
}
