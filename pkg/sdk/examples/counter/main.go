// Command counter is a reduce UDF that counts the messages of each window
// and keys: one result per window and keys, with those keys and the count in
// decimal as its payload.
package main

import (
	"context"
	"log"
	"strconv"

	"github.com/sluiceflow/sluice/pkg/sdk/reducer"
)

func main() {
	if err := reducer.NewServer(reducer.ReducerFunc(count)).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func count(_ context.Context, keys []string, in <-chan reducer.Datum, _ reducer.Metadata) reducer.Messages {
	n := 0
	for range in {
		n++
	}
	return reducer.Messages{reducer.NewMessage([]byte(strconv.Itoa(n))).WithKeys(keys)}
}
