package reducestreamer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sdk/reducestreamer"
)

// A streaming reduce function that sends the count of its window so far every
// ten messages, and the rest at the end of the window.
func countByTens(ctx context.Context, keys []string, in <-chan reducestreamer.Datum, out chan<- reducestreamer.Message, _ reducestreamer.Metadata) {
	n := 0
	for range in {
		if n++; n == 10 {
			select {
			case out <- reducestreamer.NewMessage([]byte(strconv.Itoa(n))).WithKeys(keys):
			case <-ctx.Done():
				return
			}
			n = 0
		}
	}
	out <- reducestreamer.NewMessage([]byte(strconv.Itoa(n))).WithKeys(keys)
}

func Example() {
	dir, err := os.MkdirTemp("", "reducestreamer")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- reducestreamer.NewServer(reducestreamer.ReduceStreamerFunc(countByTens), reducestreamer.WithSocketDir(dir)).Start(ctx)
	}()

	info, err := serverinfo.Wait(ctx, filepath.Join(dir, serverinfo.ReduceStreamInfoFile), 5*time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Println("protocol:", info.Protocol)

	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// protocol: uds
	// stopped: <nil>
}
