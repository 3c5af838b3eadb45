// Command cat is a map UDF that passes every message on unchanged, with its
// keys and user metadata: the smallest map there is, for measuring what a
// user-defined map costs.
package main

import (
	"context"
	"log"

	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

func main() {
	if err := mapper.NewServer(mapper.MapperFunc(cat)).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func cat(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
	return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys(keys).WithUserMetadata(d.UserMetadata())}
}
