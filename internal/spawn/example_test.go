package spawn_test

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/sluiceflow/sluice/internal/spawn"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// firstLine keeps the first line written to it and closes done then.
type firstLine struct {
	mu   sync.Mutex
	buf  strings.Builder
	once sync.Once
	done chan struct{}
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), "\n") {
		w.once.Do(func() { close(w.done) })
	}
	return len(p), nil
}

// A MonoVertex's map runs as a child process in the socket directory; here
// its command prints its role, vertex and replica, and waits until Stop
// stops it.
func Example() {
	dir, err := os.MkdirTemp("", "spawn")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	f, err := vertexconfig.Parse([]byte(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: cat
spec:
  source:
    generator: {}
  udf:
    container:
      image: my/cat:v1
      command: [sh, -c, 'echo $NUMAFLOW_UD_CONTAINER_TYPE of $NUMAFLOW_MONO_VERTEX_NAME, replica $NUMAFLOW_REPLICA; exec sleep 60']
  sink:
    log: {}
`))
	if err != nil {
		panic(err)
	}
	out := &firstLine{done: make(chan struct{})}
	g, err := spawn.Start(f, dir, spawn.Deps{Commands: true, Replica: 2, Stdout: out})
	if err != nil {
		panic(err)
	}
	<-out.done
	g.Stop()
	fmt.Print(strings.SplitAfter(out.buf.String(), "\n")[0])
	// Output: udf of cat, replica 2
}
