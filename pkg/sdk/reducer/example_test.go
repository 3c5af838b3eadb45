package reducer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sdk/reducer"
)

// A reduce function that counts the messages of each window and keys.
func count(_ context.Context, keys []string, in <-chan reducer.Datum, _ reducer.Metadata) reducer.Messages {
	n := 0
	for range in {
		n++
	}
	return reducer.Messages{reducer.NewMessage([]byte(strconv.Itoa(n))).WithKeys(keys)}
}

func Example() {
	dir, err := os.MkdirTemp("", "reducer")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- reducer.NewServer(reducer.ReducerFunc(count), reducer.WithSocketDir(dir)).Start(ctx)
	}()

	info, err := serverinfo.Wait(ctx, filepath.Join(dir, serverinfo.ReduceInfoFile), 5*time.Millisecond)
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
