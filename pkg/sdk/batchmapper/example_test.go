package batchmapper_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sdk/batchmapper"
)

// A batch map function that numbers the messages of each batch.
func number(_ context.Context, datums <-chan batchmapper.Datum) batchmapper.BatchResponses {
	var out batchmapper.BatchResponses
	n := 0
	for d := range datums {
		n++
		msg := batchmapper.NewMessage(fmt.Appendf(nil, "%d:%s", n, d.Value()))
		out = append(out, batchmapper.NewBatchResponse(d.ID(), msg))
	}
	return out
}

func Example() {
	dir, err := os.MkdirTemp("", "batchmapper")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- batchmapper.NewServer(batchmapper.BatchMapperFunc(number), batchmapper.WithSocketDir(dir)).Start(ctx)
	}()

	info, err := serverinfo.Wait(ctx, filepath.Join(dir, serverinfo.MapInfoFile), 5*time.Millisecond)
	if err != nil {
		panic(err)
	}
	_, err = os.Stat(filepath.Join(dir, serverinfo.BatchMapSocket))
	fmt.Println("map mode:", info.Metadata[serverinfo.MapModeKey], "socket present:", err == nil)

	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// map mode: batch-map socket present: true
	// stopped: <nil>
}
