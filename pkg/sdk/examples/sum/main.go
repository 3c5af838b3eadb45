// Command sum is a reduce UDF that adds up the integer payloads of each
// window and keys: one result per window and keys, with those keys and the
// sum in decimal as its payload. A payload that is not a decimal integer is
// left out, and logged.
package main

import (
	"context"
	"log"
	"strconv"
	"strings"

	"github.com/sluiceflow/sluice/pkg/sdk/reducer"
)

func main() {
	if err := reducer.NewServer(reducer.ReducerFunc(sum)).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func sum(_ context.Context, keys []string, in <-chan reducer.Datum, md reducer.Metadata) reducer.Messages {
	var total int64
	for d := range in {
		v, err := strconv.ParseInt(strings.TrimSpace(string(d.Value())), 10, 64)
		if err != nil {
			log.Printf("sum: window %s of keys %q: leaving out %q: not an integer", md.IntervalWindow.Start.UTC().Format("15:04:05.000"), keys, d.Value())
			continue
		}
		total += v
	}
	return reducer.Messages{reducer.NewMessage([]byte(strconv.FormatInt(total, 10))).WithKeys(keys)}
}
