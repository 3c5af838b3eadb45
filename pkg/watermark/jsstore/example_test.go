package jsstore_test

import (
	"context"
	"log"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluiceflow/sluice/pkg/watermark"
	"github.com/sluiceflow/sluice/pkg/watermark/jsstore"
)

// A source replica publishes to the bucket of the edge it writes to, and a
// replica of the vertex downstream fetches from it. (It needs a nats-server
// with JetStream, so it is compiled and not run.)
func Example() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	store, err := jsstore.Open(ctx, js, jsstore.Config{Bucket: "p1-in-out_WM", TTL: time.Hour})
	if err != nil {
		log.Fatal(err)
	}

	pub, _ := watermark.NewPublisher(ctx, store, "p1-in-0")
	go func() { _ = pub.Run(ctx) }() // heartbeats
	defer pub.Close(ctx)
	_ = pub.Publish(ctx, 0, time.Now().Add(-time.Minute), 0)

	f, _ := watermark.NewFetcher(store, 0)
	_ = f.Refresh(ctx)
	log.Println("watermark", f.At(0))
}
