package sessionreducer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sdk/sessionreducer"
)

// counter counts the messages of one session; merged sessions add up.
type counter struct{ n atomic.Int64 }

func (c *counter) SessionReduce(_ context.Context, keys []string, in <-chan sessionreducer.Datum) sessionreducer.Messages {
	for range in {
		c.n.Add(1)
	}
	return sessionreducer.Messages{sessionreducer.NewMessage(strconv.AppendInt(nil, c.n.Load(), 10)).WithKeys(keys)}
}

func (c *counter) Accumulator(context.Context) []byte { return strconv.AppendInt(nil, c.n.Load(), 10) }

func (c *counter) MergeAccumulator(_ context.Context, acc []byte) {
	n, _ := strconv.ParseInt(string(acc), 10, 64)
	c.n.Add(n)
}

func Example() {
	dir, err := os.MkdirTemp("", "sessionreducer")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	create := sessionreducer.CreatorFunc(func() sessionreducer.SessionReducer { return &counter{} })
	go func() {
		done <- sessionreducer.NewServer(create, sessionreducer.WithSocketDir(dir)).Start(ctx)
	}()

	info, err := serverinfo.Wait(ctx, filepath.Join(dir, serverinfo.SessionReduceInfoFile), 5*time.Millisecond)
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
