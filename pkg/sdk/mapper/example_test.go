package mapper_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

// A map function that doubles each message and tags empty ones to drop.
func double(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
	if len(d.Value()) == 0 {
		return mapper.Messages{mapper.MessageToDrop()}
	}
	out := mapper.NewMessage(bytes.Repeat(d.Value(), 2)).WithKeys(keys)
	return mapper.Messages{out}
}

func Example() {
	dir, err := os.MkdirTemp("", "mapper")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		// In a UDF's main, this is all there is (without the option, the
		// server listens in SLUICE_UDS_DIR or /var/run/numaflow).
		done <- mapper.NewServer(mapper.MapperFunc(double), mapper.WithSocketDir(dir)).Start(ctx)
	}()

	// A runtime waits for the server-info file, then connects to map.sock.
	info, err := serverinfo.Wait(ctx, filepath.Join(dir, serverinfo.MapInfoFile), 5*time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Println("map mode:", info.Metadata[serverinfo.MapModeKey])

	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// map mode: unary-map
	// stopped: <nil>
}

func ExampleMessageToNack() {
	delay := uint64(500) // milliseconds
	m := mapper.MessageToNack(&mapper.NackOptions{Delay: &delay})
	fmt.Println(m.IsNack(), m.Tags(), m.NackOptions().DelayDuration())
	// Output: true [U+005C__NACK__] 500ms
}

func ExampleUserMetadata() {
	md := mapper.NewUserMetadata()
	md.AddKV("kafka", "topic", []byte("orders"))
	md.AddKV("kafka", "partition", []byte("3"))
	md.CreateGroup("audit")
	fmt.Println(md.Groups(), md.Keys("kafka"), string(md.Value("kafka", "topic")))
	fmt.Println(md)
	// Output:
	// [audit kafka] [partition topic] orders
	// audit{} kafka{partition="3" topic="orders"}
}
