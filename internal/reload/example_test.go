package reload_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/reload"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

const monoVertex = `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: mv
spec:
  limits:
    rateLimit:
      max: MAX
  source:
    generator: {}
  sink:
    log: {}
`

// A replica running max 100 takes max 250 on without a restart when its file
// changes: here the force channel, which vertex run feeds SIGHUP, makes the
// Watcher look at once.
func Example() {
	dir, err := os.MkdirTemp("", "reload")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "mv.yaml")
	write := func(max string) {
		if err := os.WriteFile(path, []byte(strings.Replace(monoVertex, "MAX", max, 1)), 0o644); err != nil {
			panic(err)
		}
	}
	write("100")
	running, err := vertexconfig.Load(path)
	if err != nil {
		panic(err)
	}
	w := reload.New(path, running, reload.Deps{}) // Interval 0: only when forced

	ctx, cancel := context.WithCancel(context.Background())
	force := make(chan os.Signal, 1)
	done := make(chan error)
	go func() {
		done <- w.Run(ctx, force, func(f *config.File) error {
			fmt.Println("max", *f.MonoVertex.Spec.Limits.RateLimit.Max)
			cancel() // a vertex would call UpdateRateLimit and carry on
			return nil
		})
	}()
	write("250")
	force <- syscall.SIGHUP
	fmt.Println(<-done)
	// Output:
	// max 250
	// <nil>
}
