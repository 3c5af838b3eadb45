package jetstream_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/jetstream"
)

// A writer and a reader of one buffer. It needs a NATS server with
// JetStream at nats://127.0.0.1:4222, so it is compiled but not run.
func Example() {
	ctx := context.Background()
	conn, err := jetstream.Connect(ctx, jetstream.Config{URL: "nats://127.0.0.1:4222"})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	spec := jetstream.BufferSpec{Name: "mypipe-cat-0", MaxLength: 30000, UsageLimit: 80}
	if err := conn.CreateBuffer(ctx, spec); err != nil {
		log.Fatal(err)
	}

	// The upstream vertex "in" writes...
	w := conn.Writer(spec, "in")
	defer w.Close()
	msgs := []isb.Message{{ID: "1", Value: []byte("hello"), EventTime: time.Now()}}
	errs := make([]error, len(msgs))
	if err := w.Write(ctx, msgs, errs); err != nil {
		log.Fatal(err)
	}
	fmt.Println("written:", errs[0] == nil)

	// ...and a replica of the vertex "cat" reads and acks.
	r, err := conn.Reader(spec.Name, time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	buf := make([]isb.ReadMessage, 500)
	n, err := r.Read(ctx, buf)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range buf[:n] {
		fmt.Printf("%s: %s\n", m.ID, m.Value)
	}
	if err := r.Ack(ctx, buf[:n]); err != nil {
		log.Fatal(err)
	}
}
