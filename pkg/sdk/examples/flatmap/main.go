// Command flatmap is a map UDF that splits each payload on commas into one
// message per part, each with the keys of its input: "a,b,c" becomes "a",
// "b" and "c". A payload without commas passes unchanged.
package main

import (
	"bytes"
	"context"
	"log"

	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

func main() {
	if err := mapper.NewServer(mapper.MapperFunc(flatMap)).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func flatMap(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
	parts := bytes.Split(d.Value(), []byte(","))
	out := make(mapper.Messages, len(parts))
	for i, p := range parts {
		out[i] = mapper.NewMessage(p).WithKeys(keys)
	}
	return out
}
