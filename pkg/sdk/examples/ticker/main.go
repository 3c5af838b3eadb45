// Command ticker is a side input whose value is a counter: 1 at the first
// retrieval, 2 at the next, and so on, in decimal.
package main

import (
	"context"
	"log"
	"strconv"
	"sync/atomic"

	"github.com/sluiceflow/sluice/pkg/sdk/sideinput"
)

func main() {
	var n atomic.Int64
	tick := func(context.Context) sideinput.Message {
		return sideinput.BroadcastMessage([]byte(strconv.FormatInt(n.Add(1), 10)))
	}
	if err := sideinput.NewServer(sideinput.RetrieveFunc(tick)).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}
