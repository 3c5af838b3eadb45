// Command batchcat is a batch map UDF that passes every message of each batch
// on unchanged, with its keys.
package main

import (
	"context"
	"log"

	"github.com/sluiceflow/sluice/pkg/sdk/batchmapper"
)

func main() {
	if err := batchmapper.NewServer(batchmapper.BatchMapperFunc(batchCat)).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func batchCat(_ context.Context, datums <-chan batchmapper.Datum) batchmapper.BatchResponses {
	var out batchmapper.BatchResponses
	for d := range datums {
		out = append(out, batchmapper.NewBatchResponse(d.ID(), batchmapper.NewMessage(d.Value()).WithKeys(d.Keys())))
	}
	return out
}
