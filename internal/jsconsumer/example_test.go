package jsconsumer_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// A reader of the durable pull consumer "billing" of the stream ORDERS,
// which takes each JetStream message as one message. It needs a NATS
// server with JetStream at nats://127.0.0.1:4222, and the consumer, so it
// is compiled but not run.
func Example() {
	ctx := context.Background()
	// No reconnect buffer: what is sent while the connection is down fails
	// at once.
	nc, err := nats.Connect("nats://127.0.0.1:4222", nats.ReconnectBufSize(-1))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	c, err := jsconsumer.New(nc, "ORDERS", "billing", jsconsumer.Options{
		Decode: func(msg *nats.Msg, out []isb.Message, _ *jsconsumer.Keys) ([]isb.Message, error) {
			return append(out, isb.Message{Value: msg.Data}), nil
		},
		ReadTimeout: time.Second,
		ConfirmAcks: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // before nc's: it hands back what is not acked

	buf := make([]isb.ReadMessage, 100)
	n, err := c.Read(ctx, buf)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range buf[:n] {
		fmt.Printf("%s\n", m.Value)
	}
	if err := c.Ack(ctx, buf[:n]); err != nil {
		log.Fatal(err)
	}
}
