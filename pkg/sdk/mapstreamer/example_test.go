package mapstreamer_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sdk/mapstreamer"
)

// A streaming map function that emits each space-separated word as soon as
// it is found.
func splitWords(ctx context.Context, keys []string, d mapstreamer.Datum, out chan<- mapstreamer.Message) {
	for _, w := range bytes.Fields(d.Value()) {
		select {
		case out <- mapstreamer.NewMessage(w).WithKeys(keys):
		case <-ctx.Done():
			return
		}
	}
}

func Example() {
	dir, err := os.MkdirTemp("", "mapstreamer")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- mapstreamer.NewServer(mapstreamer.MapStreamerFunc(splitWords), mapstreamer.WithSocketDir(dir)).Start(ctx)
	}()

	info, err := serverinfo.Wait(ctx, filepath.Join(dir, serverinfo.MapInfoFile), 5*time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Println("map mode:", info.Metadata[serverinfo.MapModeKey])

	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// map mode: stream-map
	// stopped: <nil>
}
