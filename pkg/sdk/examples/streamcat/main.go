// Command streamcat is a stream map UDF that passes every message on
// unchanged, with its keys, as the one message of its stream.
package main

import (
	"context"
	"log"

	"github.com/sluiceflow/sluice/pkg/sdk/mapstreamer"
)

func main() {
	if err := mapstreamer.NewServer(mapstreamer.MapStreamerFunc(streamCat)).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func streamCat(ctx context.Context, keys []string, d mapstreamer.Datum, out chan<- mapstreamer.Message) {
	select {
	case out <- mapstreamer.NewMessage(d.Value()).WithKeys(keys):
	case <-ctx.Done():
	}
}
