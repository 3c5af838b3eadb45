package sourcetransformer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcetransformer"
)

// A transformer that takes the event time from the payload, a Unix time in
// seconds, and drops payloads that are not one.
func stamp(_ context.Context, keys []string, d sourcetransformer.Datum) sourcetransformer.Messages {
	secs, err := strconv.ParseInt(string(d.Value()), 10, 64)
	if err != nil {
		return sourcetransformer.Messages{sourcetransformer.MessageToDrop(d.EventTime())}
	}
	out := sourcetransformer.NewMessage(d.Value(), time.Unix(secs, 0)).WithKeys(keys)
	return sourcetransformer.Messages{out}
}

func Example() {
	dir, err := os.MkdirTemp("", "transformer")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		st := sourcetransformer.SourceTransformerFunc(stamp)
		done <- sourcetransformer.NewServer(st, sourcetransformer.WithSocketDir(dir)).Start(ctx)
	}()

	info, err := serverinfo.Wait(ctx, filepath.Join(dir, serverinfo.SourceTransformerInfoFile), 5*time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Println("minimum Numaflow version:", info.MinimumNumaflowVersion)

	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// minimum Numaflow version: 1.4.0-z
	// stopped: <nil>
}
