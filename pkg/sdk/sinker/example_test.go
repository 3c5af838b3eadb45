package sinker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
)

// A sink that prints each message and fails the empty ones.
func printSink(_ context.Context, datums <-chan sinker.Datum) sinker.Responses {
	var out sinker.Responses
	for d := range datums {
		if len(d.Value()) == 0 {
			out = append(out, sinker.ResponseFailure(d.ID(), "empty message"))
			continue
		}
		fmt.Println(string(d.Value()))
		out = append(out, sinker.ResponseOK(d.ID()))
	}
	return out
}

func Example() {
	dir, err := os.MkdirTemp("", "sinker")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- sinker.NewServer(sinker.SinkerFunc(printSink), sinker.WithSocketDir(dir)).Start(ctx)
	}()

	// Without NUMAFLOW_UD_CONTAINER_TYPE, the server is the primary sink.
	if _, err := serverinfo.Wait(ctx, filepath.Join(dir, serverinfo.SinkInfoFile), 5*time.Millisecond); err != nil {
		panic(err)
	}
	_, err = os.Stat(filepath.Join(dir, serverinfo.SinkSocket))
	fmt.Println("listening on sink.sock:", err == nil)

	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// listening on sink.sock: true
	// stopped: <nil>
}
